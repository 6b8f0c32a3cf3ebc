package sandbox

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Inside an egress-enabled sandbox the proxy is 127.0.0.1: its resolver on
// port 53 answers every allowed name with this address, and it listens on
// every allowed port. Anything not local goes to the refusal device, whose
// own address is tunAddr.
var (
	proxyAddr = netip.MustParseAddr("127.0.0.1")
	tunAddr   = netip.MustParseAddr("100.127.255.2")
)

const tunName = "lwrefuse0"

// inNetns runs fn on a locked OS thread switched into the network
// namespace nsFD. Sockets fn makes belong to that namespace for their whole
// life. If the thread cannot be switched back it stays locked, so Go
// retires it instead of reusing a thread in the wrong namespace.
func inNetns(nsFD int, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open own network namespace: %w", err)
			return
		}
		defer unix.Close(self)
		if err := unix.Setns(nsFD, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter the sandbox's network namespace: %w", err)
			return
		}
		ferr := fn()
		if err := unix.Setns(self, unix.CLONE_NEWNET); err != nil {
			// Stay locked: the thread exits with this goroutine.
			errc <- fmt.Errorf("return to the host's network namespace: %w (after: %v)", err, ferr)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// ifaceUp sets IFF_UP on a link of the current namespace and, when addr is
// valid, gives it that IPv4 address.
func ifaceUp(name string, addr netip.Addr) (int, error) {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("socket for %s: %w", name, err)
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return 0, fmt.Errorf("ifreq %s: %w", name, err)
	}
	if addr.IsValid() {
		a := addr.As4()
		if err := ifr.SetInet4Addr(a[:]); err != nil {
			return 0, fmt.Errorf("address for %s: %w", name, err)
		}
		if err := unix.IoctlIfreq(s, unix.SIOCSIFADDR, ifr); err != nil {
			return 0, fmt.Errorf("set address of %s: %w", name, err)
		}
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return 0, fmt.Errorf("read flags of %s: %w", name, err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return 0, fmt.Errorf("bring %s up: %w", name, err)
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFINDEX, ifr); err != nil {
		return 0, fmt.Errorf("index of %s: %w", name, err)
	}
	return int(ifr.Uint32()), nil
}

// openTun makes the refusal device in the current namespace; it returns
// the device's file (non-blocking, so reads go through Go's poller).
func openTun() (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(tunName)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("create tun device %s: %w", tunName, err)
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+tunName), nil
}

// addRoute adds an IPv4 route in the current namespace over rtnetlink:
// dst via the link oif, of type rtype (unicast or local) in table.
func addRoute(dst netip.Prefix, oif int, table, rtype, scope uint8) error {
	s, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	defer unix.Close(s)
	if err := unix.Bind(s, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("bind netlink: %w", err)
	}
	attr := func(typ uint16, data []byte) []byte {
		b := make([]byte, unix.SizeofRtAttr, unix.SizeofRtAttr+len(data)+3)
		binary.NativeEndian.PutUint16(b[0:], uint16(unix.SizeofRtAttr+len(data)))
		binary.NativeEndian.PutUint16(b[2:], typ)
		b = append(b, data...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
		return b
	}
	rtm := []byte{unix.AF_INET, byte(dst.Bits()), 0, 0, table, unix.RTPROT_STATIC, scope, rtype, 0, 0, 0, 0}
	body := append([]byte{}, rtm...)
	if dst.Bits() > 0 {
		a := dst.Addr().As4()
		body = append(body, attr(unix.RTA_DST, a[:])...)
	}
	var idx [4]byte
	binary.NativeEndian.PutUint32(idx[:], uint32(oif))
	body = append(body, attr(unix.RTA_OIF, idx[:])...)
	msg := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(body))
	binary.NativeEndian.PutUint32(msg[0:], uint32(unix.SizeofNlMsghdr+len(body)))
	binary.NativeEndian.PutUint16(msg[4:], unix.RTM_NEWROUTE)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL)
	binary.NativeEndian.PutUint32(msg[8:], 1)
	msg = append(msg, body...)
	if err := unix.Sendto(s, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("send route %s: %w", dst, err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(s, buf, 0)
	if err != nil {
		return fmt.Errorf("read netlink answer for route %s: %w", dst, err)
	}
	if n < unix.SizeofNlMsghdr+4 || binary.NativeEndian.Uint16(buf[4:]) != unix.NLMSG_ERROR {
		return fmt.Errorf("route %s: unexpected netlink answer (%d bytes)", dst, n)
	}
	if code := int32(binary.NativeEndian.Uint32(buf[unix.SizeofNlMsghdr:])); code != 0 {
		return fmt.Errorf("add route %s: %w", dst, unix.Errno(-code))
	}
	return nil
}

// kernelCounters reads the counters the kernel keeps about refused traffic
// in the current namespace: packets routed to the refusal device, sends with
// no route at all (IPv6 has none), connections refused by a closed port.
func kernelCounters() map[string]int64 {
	out := map[string]int64{}
	if b, err := os.ReadFile("/proc/thread-self/net/snmp"); err == nil {
		t := snmpTable(b)
		for k, name := range map[string]string{
			"Ip.OutNoRoutes": "ipv4_out_no_routes", "Tcp.AttemptFails": "tcp_attempt_fails",
			"Tcp.OutRsts": "tcp_out_rsts", "Icmp.InDestUnreachs": "icmp_in_dest_unreachs",
			"Udp.OutDatagrams": "udp_out_datagrams",
		} {
			if v, ok := t[k]; ok {
				out[name] = v
			}
		}
	}
	if b, err := os.ReadFile("/proc/thread-self/net/snmp6"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "Ip6OutNoRoutes" {
				out["ipv6_out_no_routes"], _ = strconv.ParseInt(f[1], 10, 64)
			}
		}
	}
	if b, err := os.ReadFile("/proc/thread-self/net/dev"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			name, rest, ok := strings.Cut(sc.Text(), ":")
			if !ok || strings.TrimSpace(name) != tunName {
				continue
			}
			// Receive fields come first (8), then transmit: packets is the 2nd.
			if f := strings.Fields(rest); len(f) >= 10 {
				out["refusal_device_packets"], _ = strconv.ParseInt(f[9], 10, 64)
			}
		}
	}
	return out
}

// snmpTable parses /proc/net/snmp's header/value line pairs into
// "Proto.Field" → value.
func snmpTable(b []byte) map[string]int64 {
	out := map[string]int64{}
	lines := strings.Split(string(b), "\n")
	for i := 0; i+1 < len(lines); i += 2 {
		h, v := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(h) != len(v) || len(h) == 0 || h[0] != v[0] {
			continue
		}
		proto := strings.TrimSuffix(h[0], ":")
		for j := 1; j < len(h); j++ {
			if n, err := strconv.ParseInt(v[j], 10, 64); err == nil {
				out[proto+"."+h[j]] = n
			}
		}
	}
	return out
}
