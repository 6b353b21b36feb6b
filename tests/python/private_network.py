"""A private network namespace for tests and benchmarks that start servers (Ray, KServe): only
the loopback interface exists there, so nothing they start can listen on or reach another address.
Standard library only (the serving tests run in a venv without torch).

    import private_network
    private_network.enter()                 # first thing: re-executes this program under unshare -n
    ...start the servers...
    assert not private_network.beyond_loopback(private_network.listening_sockets())
    private_network.stop_leftovers()        # after stopping them: raises if any process is left

enter() needs root (CI runs as root) and `unshare` and `ip` (util-linux, iproute2: ./bazelw
installs them).
"""

import os
import signal
import socket
import subprocess
import sys
import time

_INSIDE = "TDP_PRIVATE_NETWORK"


def enter():
    """Re-executes this program (its arguments unchanged) in a network namespace of its own, once,
    then brings its loopback interface up and checks that it is the only one."""
    if os.environ.get(_INSIDE) != "1":
        os.environ[_INSIDE] = "1"
        sys.stdout.flush()
        sys.stderr.flush()
        os.execvp("unshare", ["unshare", "--net", "--", sys.executable] + sys.argv)
    subprocess.check_call(["ip", "link", "set", "lo", "up"])
    check_only_loopback()


def check_only_loopback():
    interfaces = [name for _, name in socket.if_nameindex()]
    if interfaces != ["lo"]:
        raise RuntimeError("expected a private network namespace whose only interface is lo, found %s" % interfaces)


def listening_sockets():
    """(address, port) of every TCP socket listening in this network namespace (/proc/net is per
    namespace)."""
    found = []
    for path, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        with open(path) as table:
            next(table)
            for row in table:
                fields = row.split()
                if fields[3] != "0A":  # LISTEN
                    continue
                address, port = fields[1].split(":")
                raw = bytes.fromhex(address)
                # The kernel prints each 32-bit word in host (little-endian) order.
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                found.append((socket.inet_ntop(family, raw), int(port, 16)))
    return found


def beyond_loopback(sockets):
    """The listeners of `sockets` on neither a loopback nor a wildcard address (a wildcard can only
    mean lo in a namespace that has nothing else: check_only_loopback)."""
    allowed = ("0.0.0.0", "::", "::1")
    return [(a, p) for a, p in sockets if not (a.startswith("127.") or a in allowed or a.startswith("::ffff:127."))]


def processes_in_this_namespace():
    """(pid, command line) of every other process in this network namespace."""
    mine = os.readlink("/proc/self/ns/net")
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if int(pid) != os.getpid() and os.readlink("/proc/%s/ns/net" % pid) == mine:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    found.append((int(pid), f.read().replace(b"\0", b" ").decode(errors="replace")[:120]))
        except OSError:
            pass  # exited meanwhile
    return found


def stop_leftovers(grace_seconds=20):
    """Waits up to grace_seconds for the other processes of this namespace to exit, kills what is
    left, and raises AssertionError naming them if any was."""
    deadline = time.monotonic() + grace_seconds
    while processes_in_this_namespace() and time.monotonic() < deadline:
        time.sleep(0.2)
    left = processes_in_this_namespace()
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if left:
        raise AssertionError("processes left in the namespace after the servers stopped: %s" % left)
