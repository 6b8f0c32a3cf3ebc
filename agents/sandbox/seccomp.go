package sandbox

import (
	"fmt"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// deniedSyscalls fail with EPERM inside the sandbox. The namespaces already
// contain what these could reach; the filter narrows the kernel surface the
// command can poke at (the same spirit as Docker's default profile, as a
// deny list so ordinary Python keeps working).
var deniedSyscalls = []string{
	// Leaving or re-arranging the namespaces and mounts.
	"unshare", "setns", "mount", "umount2", "pivot_root", "chroot",
	"open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	// Kernel keyrings, BPF, perf, userfaultfd, io_uring: large attack surface.
	"keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	// Other processes' memory, file handles that bypass path checks.
	"process_vm_readv", "process_vm_writev", "open_by_handle_at", "name_to_handle_at",
	// Machine-wide state.
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"reboot", "swapon", "swapoff", "acct", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"iopl", "ioperm", "quotactl", "syslog", "vhangup", "personality",
}

// nsFlags are the clone flags that would make new namespaces.
const nsFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

func seccompPolicy() seccomp.Policy {
	return seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Action: seccomp.ActionErrno, Names: deniedSyscalls},
			{
				Action: seccomp.ActionErrno,
				NamesWithCondtions: []seccomp.NameWithConditions{
					// clone with any namespace flag.
					{Name: "clone", Conditions: seccomp.ArgumentConditions{
						{Argument: 0, Operation: seccomp.BitsSet, Value: nsFlags},
					}},
					// ptrace except PTRACE_TRACEME (0) and PTRACE_DETACH (17),
					// which the helper itself uses to start the command.
					{Name: "ptrace", Conditions: seccomp.ArgumentConditions{
						{Argument: 0, Operation: seccomp.NotEqual, Value: unix.PTRACE_TRACEME},
						{Argument: 0, Operation: seccomp.NotEqual, Value: unix.PTRACE_DETACH},
					}},
				},
			},
			// clone3 passes its flags in memory the filter cannot read; ENOSYS
			// makes libc fall back to clone, whose flags it can.
			{Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS), Names: []string{"clone3"}},
		},
	}
}

// loadSeccomp installs the filter on the calling (locked) thread; the command
// forked from it inherits the filter.
func loadSeccomp() error {
	if err := seccomp.LoadFilter(seccomp.Filter{NoNewPrivs: true, Policy: seccompPolicy()}); err != nil {
		return fmt.Errorf("load seccomp filter: %w", err)
	}
	return nil
}

// seccompSupported reports whether the kernel offers seccomp filters.
func seccompSupported() bool { return seccomp.Supported() }
