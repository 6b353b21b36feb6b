"""Offline stand-in for rules_proto: tdpolicy compiles protos with the system protoc (see //proto:defs.bzl)."""

proto_library = native.proto_library
