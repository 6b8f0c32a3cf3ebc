package experiment

import (
	"errors"
	"net"
	"net/http"
	"regexp"
	"strconv"
)

// How the protocol SDKs report an HTTP status they did not expect: A2A's
// JSON-RPC transport by code, MCP's Streamable HTTP client by status text.
var (
	a2aStatusRe  = regexp.MustCompile(`unexpected HTTP status: (\d{3})`)
	httpStatusRe = regexp.MustCompile(`(Too Many Requests|Bad Gateway|Service Unavailable|Gateway Timeout)`)
)

// retryableStatus says whether an HTTP status is the infrastructure's
// (429, 502, 503, 504), as classify does for the HTTP targets.
func retryableStatus(code int) bool {
	switch code {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// code is a status code or status text's code (0 if neither).
func code(s string) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	for _, c := range []int{http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout} {
		if http.StatusText(c) == s {
			return c
		}
	}
	return 0
}

// isConnError says whether err is a connection failing (refused, reset,
// a DNS failure): no answer, so not the agent's.
func isConnError(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) || errors.As(err, &dns)
}
