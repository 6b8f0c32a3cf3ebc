package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestResolveTraceIDWithAsksForTheRangeOfIDsStartingWithThePrefix(t *testing.T) {
	var gotLo, gotHi string
	var gotLimit int
	match := func(_ context.Context, lo, hi string, limit int) ([]string, error) {
		gotLo, gotHi, gotLimit = lo, hi, limit
		return []string{"abcdef01234000000000000000000000"}, nil
	}
	id, err := ResolveTraceIDWith(context.Background(), "ABCDEF01234", match)
	if err != nil || id != "abcdef01234000000000000000000000" {
		t.Fatalf("ResolveTraceIDWith = %q, %v", id, err)
	}
	if gotLo != "abcdef01234000000000000000000000" || gotHi != "abcdef01234fffffffffffffffffffff" || gotLimit != AmbiguousCandidates+1 {
		t.Fatalf("match(lo %s, hi %s, limit %d); want the lower-cased prefix padded with 0s and fs, limit %d", gotLo, gotHi, gotLimit, AmbiguousCandidates+1)
	}
}

func TestResolveTraceIDWithListsAtMostFiveCandidatesOfAnAmbiguousPrefix(t *testing.T) {
	var ids []string
	for i := range 6 {
		ids = append(ids, fmt.Sprintf("abcdef01%024x", i+1))
	}
	match := func(context.Context, string, string, int) ([]string, error) { return ids, nil }
	_, err := ResolveTraceIDWith(context.Background(), "abcdef01", match)
	if !errors.Is(err, ErrAmbiguousTraceID) {
		t.Fatalf("error %v; want ErrAmbiguousTraceID", err)
	}
	msg := err.Error()
	for _, id := range ids[:5] {
		if !strings.Contains(msg, id) {
			t.Errorf("error %q does not list %s", msg, id)
		}
	}
	if strings.Contains(msg, ids[5]) || !strings.Contains(msg, "and more") || !strings.Contains(msg, `"abcdef01"`) {
		t.Errorf("error %q: want the prefix, five candidates and \"and more\"", msg)
	}
}

func TestResolveTraceIDWithWrapsTheBackendsErrorAndNeverAsksAboutAMalformedID(t *testing.T) {
	boom := errors.New("connection refused")
	calls := 0
	match := func(context.Context, string, string, int) ([]string, error) {
		calls++
		return nil, boom
	}
	if _, err := ResolveTraceIDWith(context.Background(), "abcdef01", match); !errors.Is(err, boom) || !strings.Contains(err.Error(), `"abcdef01"`) {
		t.Fatalf("error %v; want the backend's error, naming the input", err)
	}
	calls = 0
	long := strings.Repeat("z", 10000)
	_, err := ResolveTraceIDWith(context.Background(), long, match)
	if !errors.Is(err, ErrBadTraceID) || calls != 0 {
		t.Fatalf("malformed id: error %v after %d lookups; want ErrBadTraceID and none", err, calls)
	}
	if len(err.Error()) > 200 {
		t.Errorf("the error for a 10000-byte id is %d bytes long; want it clipped", len(err.Error()))
	}
}

// resolveOnly is a Reader whose ResolveTraceID records its calls.
type resolveOnly struct {
	Reader
	asked []string
}

func (r *resolveOnly) ResolveTraceID(_ context.Context, id string) (string, error) {
	r.asked = append(r.asked, id)
	return "resolved", nil
}

func TestTraceIDOfTakesAFullIDAsItIsAndResolvesEverythingElse(t *testing.T) {
	r := &resolveOnly{}
	got, err := TraceIDOf(context.Background(), r, "4BF92F3577B34DA6A3CE929D0E0E4736")
	if err != nil || got != "4bf92f3577b34da6a3ce929d0e0e4736" || len(r.asked) != 0 {
		t.Fatalf("full id: %q, %v, asked %v; want it lower-cased with no lookup", got, err, r.asked)
	}
	got, err = TraceIDOf(context.Background(), r, "4bf92f35")
	if err != nil || got != "resolved" || len(r.asked) != 1 || r.asked[0] != "4bf92f35" {
		t.Fatalf("prefix: %q, %v, asked %v; want one ResolveTraceID", got, err, r.asked)
	}
}
