package anthropic

import (
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/loomwork/loomwork/agents/gateway"
	"github.com/loomwork/loomwork/agents/gateway/internal/sse"
	"github.com/loomwork/loomwork/agents/llm"
)

const maxStreamBlocks = 4096

type streamEvent struct {
	Type         string       `json:"type"`
	Message      *msgResponse `json:"message"`       // message_start
	Index        *int         `json:"index"`         // content_block_*
	ContentBlock *respBlock   `json:"content_block"` // content_block_start
	Delta        *struct {
		Type        string  `json:"type"`
		Text        string  `json:"text"`
		PartialJSON string  `json:"partial_json"`
		StopReason  *string `json:"stop_reason"`
	} `json:"delta"` // content_block_delta, message_delta
	Usage *msgUsage  `json:"usage"` // message_delta
	Error *errorBody `json:"error"` // error
}

type blockBuilder struct {
	typ, id, name string
	text          strings.Builder
	input         strings.Builder
	startInput    json.RawMessage
}

// decodeStream assembles a Messages event stream: message_start carries the
// model and the input side of usage, content_block_start opens a text or
// tool_use block, content_block_delta appends text_delta text or
// input_json_delta fragments of the tool input, message_delta carries
// stop_reason and cumulative usage, message_stop ends the stream. An error
// event mid-stream becomes an APIError carrying the usage seen so far.
func decodeStream(body io.Reader) (llm.Response, error) {
	r := sse.NewReader(body)
	var (
		resp     llm.Response
		usage    msgUsage
		hasUsage bool
		blocks   = map[int]*blockBuilder{}
		order    []int
		started  bool
	)
	partial := func() *llm.Usage {
		if !hasUsage {
			return nil
		}
		u, err := usage.normalise()
		if err != nil {
			return nil
		}
		return &u
	}
	for {
		ev, err := r.Next()
		if err != nil {
			ae := &gateway.APIError{Provider: ProviderName, Type: gateway.ErrTypeStreamCut, Retryable: true,
				Usage: partial(), Err: err, Message: "stream ended before message_stop"}
			if errors.Is(err, sse.ErrEventTooLarge) {
				ae.Type, ae.Retryable, ae.Message = gateway.ErrTypeDecode, false, err.Error()
			}
			return llm.Response{}, ae
		}
		var se streamEvent
		if err := json.Unmarshal(ev.Data, &se); err != nil {
			return llm.Response{}, decodeErr("decode stream event %q: %v", ev.Name, err)
		}
		typ := se.Type
		if typ == "" {
			typ = ev.Name
		}
		switch typ {
		case "message_start":
			if se.Message == nil {
				return llm.Response{}, decodeErr("decode stream: message_start without message")
			}
			started = true
			resp.Model = se.Message.Model
			if se.Message.Usage != nil {
				usage.merge(se.Message.Usage)
				hasUsage = true
			}
		case "content_block_start":
			if se.Index == nil || se.ContentBlock == nil {
				return llm.Response{}, decodeErr("decode stream: content_block_start without index or content_block")
			}
			if _, dup := blocks[*se.Index]; dup || len(blocks) >= maxStreamBlocks {
				return llm.Response{}, decodeErr("decode stream: content block %d opened twice or too many blocks", *se.Index)
			}
			b := &blockBuilder{typ: se.ContentBlock.Type, id: se.ContentBlock.ID, name: se.ContentBlock.Name,
				startInput: se.ContentBlock.Input}
			b.text.WriteString(se.ContentBlock.Text)
			blocks[*se.Index] = b
			order = append(order, *se.Index)
		case "content_block_delta":
			if se.Index == nil || se.Delta == nil {
				return llm.Response{}, decodeErr("decode stream: content_block_delta without index or delta")
			}
			b := blocks[*se.Index]
			if b == nil {
				return llm.Response{}, decodeErr("decode stream: delta for unopened content block %d", *se.Index)
			}
			switch se.Delta.Type {
			case "text_delta":
				b.text.WriteString(se.Delta.Text)
			case "input_json_delta":
				b.input.WriteString(se.Delta.PartialJSON)
			}
		case "content_block_stop", "ping":
		case "message_delta":
			if se.Delta != nil && se.Delta.StopReason != nil {
				resp.StopReason = *se.Delta.StopReason
			}
			if se.Usage != nil {
				usage.merge(se.Usage)
				hasUsage = true
			}
		case "message_stop":
			if !started {
				return llm.Response{}, decodeErr("decode stream: message_stop before message_start")
			}
			msg := llm.Message{Role: llm.RoleAssistant}
			var text strings.Builder
			for _, i := range order {
				b := blocks[i]
				switch b.typ {
				case "text":
					text.WriteString(b.text.String())
				case "tool_use":
					input := json.RawMessage(b.input.String())
					if b.input.Len() == 0 {
						input = b.startInput
					}
					call, err := toolCall(b.id, b.name, input)
					if err != nil {
						return llm.Response{}, decodeErr("decode stream: content block %d: %v", i, err)
					}
					msg.ToolCalls = append(msg.ToolCalls, call)
				}
			}
			msg.Content = text.String()
			resp.Message = msg
			if hasUsage {
				u, err := usage.normalise()
				if err != nil {
					return llm.Response{}, decodeErr("decode stream: %v", err)
				}
				resp.Usage = u
			}
			return resp, nil
		case "error":
			if se.Error == nil {
				return llm.Response{}, decodeErr("decode stream: error event without error")
			}
			ae := se.Error.apiError(streamStatus(se.Error.Type))
			ae.Usage = partial()
			return llm.Response{}, ae
		}
		// Unknown event types are skipped, as the API's versioning policy asks.
	}
}
