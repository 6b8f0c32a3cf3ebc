package collector

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// statusError is an error that carries the OTLP gRPC status a receiver
// should answer with. It implements GRPCStatus, so the core otlpreceiver
// (through status.FromError) and the Loomwork front both honour it.
type statusError struct {
	err error
	st  *status.Status
}

func (e *statusError) Error() string              { return e.err.Error() }
func (e *statusError) Unwrap() error              { return e.err }
func (e *statusError) GRPCStatus() *status.Status { return e.st }

// newRetryable wraps err with code (UNAVAILABLE or RESOURCE_EXHAUSTED) and a
// RetryInfo suggesting when to retry, as the OTLP specification asks of a
// server that wants a sender to back off.
func newRetryable(code codes.Code, err error, retryAfter time.Duration) error {
	st := status.New(code, err.Error())
	if retryAfter > 0 {
		if withInfo, derr := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retryAfter)}); derr == nil {
			st = withInfo
		}
	}
	return &statusError{err: err, st: st}
}

// memoryLimiterRefusal is the message of a request the memory limiter
// refused: the Collector's processor's words, which senders' logs and
// operators' alerts already know.
const memoryLimiterRefusal = "data refused due to high memory usage"

// errorStatus classifies an error from the consumer chain into the status
// the sender gets.
func errorStatus(err error, retryAfter time.Duration) *status.Status {
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		return st
	}
	switch {
	case consumererror.IsPermanent(err):
		// As the core receiver does: a permanent error without a status is
		// the server's fault, and must not be retried.
		return status.New(codes.Internal, err.Error())
	}
	// Everything else, timeouts and cancellations included, may succeed
	// when retried.
	return newRetryable(codes.Unavailable, err, retryAfter).(*statusError).st
}

// httpStatus maps a gRPC code to the OTLP/HTTP status code, as the OTLP
// specification's failure tables do.
func httpStatus(c codes.Code) int {
	switch c {
	case codes.OK:
		return http.StatusOK
	case codes.Canceled, codes.DeadlineExceeded, codes.Aborted, codes.OutOfRange, codes.Unavailable, codes.DataLoss:
		return http.StatusServiceUnavailable
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.InvalidArgument:
		return http.StatusBadRequest
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.Unimplemented:
		return http.StatusNotFound
	}
	return http.StatusInternalServerError
}

// retryAfterHeader returns the Retry-After value (whole seconds, at least
// 1) from a status's RetryInfo, or "".
func retryAfterHeader(st *status.Status) string {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			secs := math.Ceil(ri.GetRetryDelay().AsDuration().Seconds())
			if secs < 1 {
				secs = 1
			}
			return strconv.FormatInt(int64(secs), 10)
		}
	}
	return ""
}
