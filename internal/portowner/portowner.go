// Package portowner finds the process listening on a TCP address, so a
// command that cannot bind it can say who holds it. On Linux it reads
// /proc: the listening socket's inode in /proc/net/tcp and tcp6, then the
// process whose file descriptors hold that inode. It finds nothing on
// other systems, and for processes this user may not inspect. A leaf on
// the standard library.
package portowner

import (
	"bufio"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Owner is a process that listens on an address.
type Owner struct {
	PID     int
	Cmdline []string // its command line, as /proc/PID/cmdline has it
}

// procRoot is where the proc file system is mounted (tests replace it).
var procRoot = "/proc"

// Listening returns the process listening on addr ("host:port"), when it
// can tell: a listener on the same port at addr's IP or at every address
// (0.0.0.0, ::).
func Listening(addr string) (Owner, bool) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return Owner{}, false
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return Owner{}, false
	}
	ip := net.ParseIP(host)
	if host == "localhost" {
		ip = net.IPv4(127, 0, 0, 1)
	}
	inodes := map[string]bool{}
	for _, f := range []string{"net/tcp", "net/tcp6"} {
		listeners(filepath.Join(procRoot, f), port, ip, inodes)
	}
	if len(inodes) == 0 {
		return Owner{}, false
	}
	return holder(inodes)
}

// listeners adds to inodes the inode of every listening socket of file
// (a /proc/net/tcp table) on port at ip or at the unspecified address.
func listeners(file string, port int, ip net.IP, inodes map[string]bool) {
	f, err := os.Open(file)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != "0A" { // TCP_LISTEN
			continue
		}
		local, p, ok := parseAddr(fields[1])
		if !ok || p != port {
			continue
		}
		if ip == nil || ip.IsUnspecified() || local.IsUnspecified() || local.Equal(ip) {
			inodes[fields[9]] = true
		}
	}
}

// parseAddr reads a /proc/net/tcp address: the IP in hex, in 32-bit words
// of host (little-endian) order, a colon, the port in hex.
func parseAddr(s string) (net.IP, int, bool) {
	h, p, ok := strings.Cut(s, ":")
	port, err := strconv.ParseUint(p, 16, 16)
	if !ok || err != nil {
		return nil, 0, false
	}
	b, err := hex.DecodeString(h)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return nil, 0, false
	}
	for i := 0; i < len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	return net.IP(b), int(port), true
}

// holder finds the process with a file descriptor on one of inodes.
func holder(inodes map[string]bool) (Owner, bool) {
	procs, err := os.ReadDir(procRoot)
	if err != nil {
		return Owner{}, false
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		fdDir := filepath.Join(procRoot, p.Name(), "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
			if err != nil || !strings.HasPrefix(link, "socket:[") {
				continue
			}
			if inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] {
				b, _ := os.ReadFile(filepath.Join(procRoot, p.Name(), "cmdline"))
				return Owner{PID: pid, Cmdline: strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")}, true
			}
		}
	}
	return Owner{}, false
}
