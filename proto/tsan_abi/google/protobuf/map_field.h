// Only on the include path under --config=tsan (//proto:protobuf_tsan_abi): protobuf 3.21's
// map_field.h gives MapFieldBase two extra members (seq1_, seq2_) when __SANITIZE_THREAD__ is
// defined, which gcc's -fsanitize=thread does. Debian's libprotobuf.so is built without TSan, so
// generated code compiled with it disagreed with the library on the class's layout and the first
// text-format parse of a map field (distribution_kwargs) crashed in
// MapField::SyncRepeatedFieldWithMapNoLock. Here map_field.h is read as the library was built.
// The extra members only served protobuf's own const/mutable race checks on map fields.
#include <cstddef>  // libstdc++'s c++config.h (_GLIBCXX_TSAN) keeps the real setting
#if defined(__SANITIZE_THREAD__)
#pragma push_macro("__SANITIZE_THREAD__")
#undef __SANITIZE_THREAD__
#include_next <google/protobuf/map_field.h>
#pragma pop_macro("__SANITIZE_THREAD__")
#else
#include_next <google/protobuf/map_field.h>
#endif
