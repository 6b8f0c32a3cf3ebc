package portowner

import (
	"net"
	"os"
	"runtime"
	"strconv"
	"testing"
)

func TestListeningFindsThisProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("portowner reads /proc, which only Linux has")
	}
	for _, network := range []string{"tcp4", "tcp6"} {
		host := map[string]string{"tcp4": "127.0.0.1", "tcp6": "[::1]"}[network]
		ln, err := net.Listen(network, host+":0")
		if err != nil {
			t.Logf("%s: %v (no such loopback here)", network, err)
			continue
		}
		o, ok := Listening(ln.Addr().String())
		if !ok || o.PID != os.Getpid() || len(o.Cmdline) == 0 {
			t.Errorf("%s %s: owner %+v, %v; want this process (%d)", network, ln.Addr(), o, ok, os.Getpid())
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if o, ok := Listening(net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); ok {
			t.Errorf("%s: a closed port still has an owner: %+v", network, o)
		}
	}
}

func TestParseAddrReadsProcNetTCP(t *testing.T) {
	for in, want := range map[string]string{
		"0100007F:1F90":                         "127.0.0.1:8080",
		"00000000:10E1":                         "0.0.0.0:4321",
		"00000000000000000000000001000000:0050": "[::1]:80",
	} {
		ip, port, ok := parseAddr(in)
		if got := net.JoinHostPort(ip.String(), strconv.Itoa(port)); !ok || got != want {
			t.Errorf("parseAddr(%q) = %s, %v; want %s", in, got, ok, want)
		}
	}
}
