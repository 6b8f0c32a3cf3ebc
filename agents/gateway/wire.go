package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/loomwork/loomwork/agents/llm"
)

// MaxResponseBytes bounds a provider's answer body.
const MaxResponseBytes = 32 << 20

// Exchange is what a provider client needs to turn an HTTP request into an
// answer; the two clients differ only in these fields, so the sending,
// error classification and key scrubbing are written once.
type Exchange struct {
	Client   *http.Client
	Provider string
	Model    string
	Key      Secret
	Now      func() time.Time
	// Stream: decode a text/event-stream answer with DecodeStream.
	Stream bool
	// RequestIDHeader names the header carrying the provider's request id,
	// used when the error body has none.
	RequestIDHeader string
	DecodeError     func(status int, body []byte) *APIError
	DecodeStream    func(io.Reader) (llm.Response, error)
	DecodeResponse  func([]byte) (llm.Response, error)
}

// Do sends hreq and decodes the answer, labelled live. A failure is an
// *APIError (classified retryable or not) with the key scrubbed from it.
func (x Exchange) Do(ctx context.Context, hreq *http.Request) (llm.Response, error) {
	hresp, err := x.Client.Do(hreq)
	if err != nil {
		return llm.Response{}, ScrubKey(TransportError(ctx, x.Provider, x.Model, err), x.Key)
	}
	defer hresp.Body.Close()

	if hresp.StatusCode < 200 || hresp.StatusCode > 299 {
		data, _ := io.ReadAll(io.LimitReader(hresp.Body, 1<<20))
		ae := x.DecodeError(hresp.StatusCode, data)
		ae.Provider, ae.Model = x.Provider, x.Model
		ae.RetryAfter = ParseRetryAfter(hresp.Header, x.Now())
		if ae.RequestID == "" {
			ae.RequestID = hresp.Header.Get(x.RequestIDHeader)
		}
		return llm.Response{}, ScrubKey(ae, x.Key)
	}

	var resp llm.Response
	if x.Stream && strings.HasPrefix(hresp.Header.Get("Content-Type"), "text/event-stream") {
		resp, err = x.DecodeStream(hresp.Body)
	} else {
		// A server that ignores stream:true answers with one JSON body;
		// accept that too.
		var data []byte
		data, err = io.ReadAll(io.LimitReader(hresp.Body, MaxResponseBytes))
		if err != nil {
			return llm.Response{}, ScrubKey(TransportError(ctx, x.Provider, x.Model, err), x.Key)
		}
		resp, err = x.DecodeResponse(data)
	}
	if err != nil {
		var ae *APIError
		if errors.As(err, &ae) {
			ae.Provider, ae.Model = x.Provider, x.Model
			if ae.Type == ErrTypeStreamCut && ctx.Err() != nil {
				return llm.Response{}, fmt.Errorf("%s %s: %w", x.Provider, x.Model, ctx.Err())
			}
			return llm.Response{}, ScrubKey(ae, x.Key)
		}
		return llm.Response{}, err
	}
	resp.Provider = x.Provider
	resp.Label = llm.LabelLive
	if resp.Model == "" {
		resp.Model = x.Model
	}
	return resp, nil
}

// ScrubKey removes the key from an *APIError's text fields (a provider may
// echo what it was sent) and returns err.
func ScrubKey(err error, key Secret) error {
	var ae *APIError
	if errors.As(err, &ae) && !key.IsZero() {
		ae.Message = key.Scrub(ae.Message)
		ae.Param = key.Scrub(ae.Param)
		if ae.Err != nil && strings.Contains(ae.Err.Error(), key.Reveal()) {
			ae.Err = errors.New(key.Scrub(ae.Err.Error()))
		}
	}
	return err
}
