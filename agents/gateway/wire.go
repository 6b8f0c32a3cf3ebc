package gateway

import (
	"bytes"
	"context"
	"encoding/json"
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

// Send sends hreq and returns the 2xx answer, its body unread (the caller
// closes it). A transport failure or an error answer is an *APIError
// (classified retryable or not, with the provider's request id and
// Retry-After) with the key scrubbed from it; a cancelled caller context is
// returned as is. Do and DoJSON are built on it, so every model endpoint a
// client calls (chat, embeddings, rerank) fails the same way.
func (x Exchange) Send(ctx context.Context, hreq *http.Request) (*http.Response, error) {
	hresp, err := x.Client.Do(hreq)
	if err != nil {
		return nil, ScrubKey(TransportError(ctx, x.Provider, x.Model, err), x.Key)
	}
	if hresp.StatusCode < 200 || hresp.StatusCode > 299 {
		defer hresp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(hresp.Body, 1<<20))
		ae := x.DecodeError(hresp.StatusCode, data)
		ae.Provider, ae.Model = x.Provider, x.Model
		ae.RetryAfter = ParseRetryAfter(hresp.Header, x.now())
		if ae.RequestID == "" && x.RequestIDHeader != "" {
			ae.RequestID = hresp.Header.Get(x.RequestIDHeader)
		}
		return nil, ScrubKey(ae, x.Key)
	}
	return hresp, nil
}

// DoJSON sends hreq and decodes a 2xx JSON answer into v; it is the
// exchange of the model endpoints that answer with one JSON body and no
// llm.Response (embeddings, rerank), so DecodeStream and DecodeResponse are
// not used. Failures are as Send's; an answer that does not decode into v is
// an *APIError of type ErrTypeDecode.
func (x Exchange) DoJSON(ctx context.Context, hreq *http.Request, v any) error {
	hresp, err := x.Send(ctx, hreq)
	if err != nil {
		return err
	}
	defer hresp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(hresp.Body, MaxResponseBytes))
	if err != nil {
		return ScrubKey(TransportError(ctx, x.Provider, x.Model, err), x.Key)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return ScrubKey(&APIError{Provider: x.Provider, Model: x.Model, Status: hresp.StatusCode, Type: ErrTypeDecode,
			Message: fmt.Sprintf("decode answer: %v", err), RequestID: hresp.Header.Get(x.RequestIDHeader)}, x.Key)
	}
	return nil
}

// PostJSON encodes body, POSTs it to url with JSON Content-Type and Accept
// and, when x.Key is set, the key as a bearer token, then decodes the answer
// into out as DoJSON does. It is the request of the OpenAI-shaped JSON
// endpoints (embeddings, rerank).
func (x Exchange) PostJSON(ctx context.Context, url string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if !x.Key.IsZero() {
		hreq.Header.Set("Authorization", "Bearer "+x.Key.Reveal())
	}
	return x.DoJSON(ctx, hreq, out)
}

func (x Exchange) now() time.Time {
	if x.Now == nil {
		return time.Now()
	}
	return x.Now()
}

// Do sends hreq and decodes the answer, labelled live. A failure is an
// *APIError (classified retryable or not) with the key scrubbed from it.
func (x Exchange) Do(ctx context.Context, hreq *http.Request) (llm.Response, error) {
	hresp, err := x.Send(ctx, hreq)
	if err != nil {
		return llm.Response{}, err
	}
	defer hresp.Body.Close()

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
