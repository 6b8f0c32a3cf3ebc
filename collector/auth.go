package collector

import (
	"context"
	"crypto/subtle"
	"net/http"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// bearerOK compares a presented "Bearer TOKEN" value in constant time. The
// scheme is case-insensitive (RFC 9110 §11.1): "bearer TOKEN" is accepted.
func bearerOK(header, token string) bool {
	got, ok := bearerToken(header)
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// bearerToken returns the token of an "Authorization: Bearer TOKEN" value,
// the scheme matched case-insensitively (RFC 9110 §11.1).
func bearerToken(header string) (string, bool) {
	const scheme = "bearer "
	if len(header) < len(scheme) || !strings.EqualFold(header[:len(scheme)], scheme) {
		return "", false
	}
	return header[len(scheme):], true
}

// bearerHTTP refuses OTLP/HTTP requests without the token with 401 and an
// OTLP Status body, as the spec asks of every error response.
func bearerHTTP(token string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !bearerOK(r.Header.Get("Authorization"), token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="loomwork-otlp"`)
			writeHTTPStatus(w, r.Header.Get("Content-Type"), http.StatusUnauthorized,
				status.New(codes.Unauthenticated, "missing or wrong bearer token: send Authorization: Bearer TOKEN"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bearerUnary refuses OTLP/gRPC calls without the token with UNAUTHENTICATED
// (not retryable, so SDKs do not hammer the server).
func bearerUnary(token string) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if vals := md.Get("authorization"); len(vals) == 0 || !bearerOK(vals[0], token) {
			return nil, status.Error(codes.Unauthenticated, "missing or wrong bearer token: send metadata authorization: Bearer TOKEN")
		}
		return handler(ctx, req)
	}
}
