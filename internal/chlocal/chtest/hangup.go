package chtest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// HangUpFirst listens on loopback and closes its first n connections at
// once (the client reads EOF during the handshake, as through a proxy
// whose server is not up yet); later connections are forwarded to target.
// It returns its address and the count of connections it accepted; it
// stops when t ends.
func HangUpFirst(t testing.TB, n int, target string) (addr string, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = new(atomic.Int32)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if accepted.Add(1) <= int32(n) {
				c.Close()
				continue
			}
			wg.Go(func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, c); up.Close() }()
				_, _ = io.Copy(c, up)
			})
		}
	})
	return ln.Addr().String(), accepted
}
