# What a testbedctl lab can leave on this host, and the process plumbing to find it: marked
# namespaces, /run/netns entries and their mounts, state and /etc/netns files, processes by owner
# marker or by a command line that names the lab, orphans reparented to a subreaper, rxe devices,
# host interfaces and netfilter rules. Used by scripts/crash-anywhere (after each SIGKILL and
# clean); Python 3 stdlib only, root to read every process's environment.
#
# It only reads; the one thing it kills (kill_owned) carries the lab's owner marker exactly.

import ctypes
import os
import shutil
import signal
import subprocess
import time

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def sh(argv, timeout=30, env=None):
    """(rc, stdout+stderr); rc None on timeout."""
    try:
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout, env=env)
        return r.returncode, r.stdout
    except subprocess.TimeoutExpired as e:
        out = e.output.decode(errors="replace") if isinstance(e.output, bytes) else (e.output or "")
        return None, out


# ---------------------------------------------------------------------------------------------
# Processes: this script as a subreaper, orphans, owner markers.


def become_subreaper():
    """Orphans of our children are reparented to us (so a killed verb's children are seen).
    Raises OSError when the kernel refuses."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(err)}")


def proc_stat(pid):
    """(state, ppid) of pid, or None when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    rest = s[s.rfind(")") + 2:].split()
    return rest[0], int(rest[1])


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def pids():
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def orphans(tracked=()):
    """Our children that no subprocess object waits for: orphans of a killed testbedctl
    reparented to us. Zombies are reaped; the living are returned as (pid, cmdline)."""
    me = os.getpid()
    alive = []
    for pid in pids():
        st = proc_stat(pid)
        if not st or st[1] != me or pid in tracked:
            continue
        if st[0] == "Z":
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            continue
        alive.append((pid, cmdline(pid)))
    return alive


ORPHAN_GRACE_S = 5.0


def lasting_orphans(tracked=()):
    """orphans() that are still alive after up to ORPHAN_GRACE_S: a child the killed verb forked
    gets SIGKILL with it (PR_SET_PDEATHSIG, capability/capability_child.cc) but can take a moment
    to exit when it is inside the kernel making or dropping a network namespace (unshare's wait
    for the namespace lock is not killable while `clean` deletes namespaces). One that is gone
    within the grace period made nothing that lasts; one that is still there is a leftover."""
    t0 = time.monotonic()
    first = alive = orphans(tracked)
    while alive and time.monotonic() < t0 + ORPHAN_GRACE_S:
        time.sleep(0.05)
        alive = orphans(tracked)
    gone = [f"{pid} {c[:60]}" for pid, c in first if pid not in {p for p, _ in alive}]
    if gone:
        print(f"      orphan(s) of the killed verb exited {time.monotonic() - t0:.2f} s after "
              f"the check began: {'; '.join(gone)}", flush=True)
    return alive


def marker(lab):
    return f"testbedctl lab={lab}"


def owned_pids(lab):
    """Processes carrying TESTBEDCTL_OWNER=<marker> exactly (core/process.h owned_processes)."""
    want = f"TESTBEDCTL_OWNER={marker(lab)}".encode()
    out = []
    for pid in pids():
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if want in f.read().split(b"\0"):
                    st = proc_stat(pid)
                    if st and st[0] != "Z":
                        out.append(pid)
        except OSError:
            pass
    return out


def kill_owned(lab):
    """SIGKILL what carries lab's marker (cleanup of last resort on our own labs only)."""
    for pid in owned_pids(lab):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


# ---------------------------------------------------------------------------------------------
# What a lab can leave behind.


def netns_names():
    try:
        return sorted(os.listdir("/run/netns"))
    except OSError:
        return []


def marked_netns(lab):
    """Namespaces whose loopback alias carries the lab's marker (tests/e2e/e2e_util.h)."""
    out = []
    for ns in netns_names():
        rc, text = sh(["ip", "-n", ns, "-o", "link", "show", "lo"], timeout=10)
        if rc == 0 and f"alias {marker(lab)} " in text:
            out.append(ns)
    return out


def rdma_devices():
    try:
        return set(os.listdir("/sys/class/infiniband"))
    except OSError:
        return set()


def host_netfilter_text():
    text = ""
    for argv in (["iptables-save"], ["nft", "list", "ruleset"]):
        if shutil.which(argv[0]):
            rc, out = sh(argv, timeout=20)
            text += out if rc == 0 else ""
    return text


def leftovers(lab, rdma_before=frozenset(), tracked=()):
    """Everything of `lab` still there, one string each; [] when nothing is."""
    left = []
    ns_prefix = f"tb-{lab}-"
    for ns in marked_netns(lab):
        left.append(f"namespace {ns} (marked)")
    for ns in netns_names():
        if ns.startswith(ns_prefix):
            left.append(f"/run/netns/{ns}")
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 4 and fields[4].startswith(f"/run/netns/{ns_prefix}"):
                    left.append(f"mount {fields[4]}")
    except OSError:
        pass
    if os.path.exists(f"/run/testbedctl/{lab}"):
        left.append(f"/run/testbedctl/{lab} ({', '.join(sorted(os.listdir(f'/run/testbedctl/{lab}')))})")
    try:
        for e in os.listdir("/etc/netns"):
            if e.startswith(ns_prefix):
                try:
                    files = [f"{f} {os.path.getsize(f'/etc/netns/{e}/{f}')} B"
                             for f in sorted(os.listdir(f"/etc/netns/{e}"))]
                except OSError:
                    files = []
                left.append(f"/etc/netns/{e} ({', '.join(files) or 'empty'})")
    except OSError:
        pass
    seen = set()
    for pid in owned_pids(lab):
        seen.add(pid)
        left.append(f"process {pid} with the marker: {cmdline(pid)[:120]}")
    lab_dir = f"/run/testbedctl/{lab}/"
    for pid in pids():
        if pid in seen or pid == os.getpid():
            continue
        c = cmdline(pid)
        st = proc_stat(pid)
        if c and st and st[0] != "Z" and (lab_dir in c or c.endswith(f"supervise {lab}")):
            seen.add(pid)
            left.append(f"process {pid} naming the lab: {c[:120]}")
    for pid, c in lasting_orphans(tracked):
        if pid not in seen:
            left.append(f"orphan {pid} of a killed testbedctl: {c[:120]}")
    for dev in sorted(rdma_devices()):
        if dev.startswith(ns_prefix) or (dev.startswith("tbrxe-") and dev not in rdma_before):
            left.append(f"rxe device {dev}")
    rc, text = sh(["ip", "-o", "link", "show"], timeout=10)
    for line in text.splitlines():
        if f"alias {marker(lab)} " in line + " ":
            left.append(f"host interface {line.split(':')[1].strip()}")
    for line in host_netfilter_text().splitlines():
        if f"{marker(lab)} " in line + " ":
            left.append(f"host netfilter rule: {line.strip()[:120]}")
    return left
