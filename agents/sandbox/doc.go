// Package sandbox runs untrusted commands — normally the coding agent's
// Python, `/usr/bin/python3 -I` — confined by the kernel, and reports why each
// run ended with evidence read from the kernel's own counters.
//
// A run re-executes the current binary as a small init helper inside new
// user, mount, pid, net, ipc, uts and cgroup namespaces, placed at clone time
// into the run's cgroup (kill, CPU accounting for the whole tree). It builds a
// tmpfs root that contains only
// /usr and its lib/bin links (read-only, nosuid, nodev), a private /proc, a
// small /tmp, /dev/{null,zero,urandom} and the per-run workspace at /work,
// pivots into it, remounts / read-only, and starts the command as an
// unprivileged uid with no-new-privs, rlimits and an optional seccomp filter,
// stopped at its exec until the parent has moved it into the cgroup holding
// its memory and process limits.
// Everything else on the host — /etc, /root, the repository, the host's
// environment, keys, .env files — is absent, not merely unwritable.
//
// Because the helper is the same binary, every program that uses this package
// must call Init first thing in main (and in TestMain of any package whose
// tests run sandboxes):
//
//	func main() {
//		sandbox.Init()
//		...
//	}
//
// Init returns immediately unless the process was started as the helper.
//
// Both cgroup layouts are supported behind one interface: pure cgroup v2, and
// the hybrid layout (cgroup2 for placement, cgroup.kill and CPU accounting; v1
// pids and memory controllers) found on the machines this was built on. A
// configuration that needs a mechanism the machine lacks is refused with an
// error naming it; nothing ever runs unconfined as a fallback.
//
// The network is off by default (only lo, down). A run with an Egress policy
// gets one way out: a proxy owned by the runner whose sockets live inside
// the run's network namespace — a resolver that answers only allowed names,
// listeners on the allowed ports that judge HTTP by Host and TLS by SNI (TLS
// is not terminated), and a refusal device that is the namespace's only
// route and records every other packet. The proxy injects credentials for
// their destination only; the sandbox never holds them. Every attempt and
// verdict is in Result.Egress (egress_*.go).
//
// A Runner with Config.Pool keeps helpers started ahead of time, namespaces
// and cgroups ready; a run claims one, uses it once, and destroys it
// (pool.go).
package sandbox
