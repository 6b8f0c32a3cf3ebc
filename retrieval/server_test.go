package retrieval_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/loomwork/loomwork/retrieval"
)

func TestServerAnswersOnLoopbackAndShutsDownCleanly(t *testing.T) {
	// Registered first, so it runs after the service's own cleanup: the
	// server and the index must leave no goroutine behind.
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	f := startTiny(t, t.TempDir())
	srv, err := retrieval.NewServer(retrieval.ServerConfig{Addr: "127.0.0.1:0"}, f.svc)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown before start: %v", err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := client.Post("http://"+srv.Addr()+"/v1/search", "application/json", strings.NewReader(`{"query":"navigation tabs","mode":"rerank","k":3,"exclude_issues":[103]}`))
	if err != nil {
		t.Fatal(err)
	}
	var out retrieval.SearchResponse
	err = json.NewDecoder(res.Body).Decode(&out)
	res.Body.Close()
	if err != nil || res.StatusCode != 200 || len(out.Hits) != 3 || out.Mode != retrieval.ModeRerank {
		t.Fatalf("status %d, %+v, %v", res.StatusCode, out, err)
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Post("http://"+srv.Addr()+"/v1/search", "application/json", strings.NewReader(`{}`)); err == nil {
		t.Error("server still answers after Shutdown")
	}
}

func TestServerConfigNamesTheBadAddress(t *testing.T) {
	if _, err := retrieval.NewServer(retrieval.ServerConfig{Addr: "nocolon"}, nil); err == nil || !strings.Contains(err.Error(), `"nocolon" is not host:port`) {
		t.Errorf("error = %v", err)
	}
}
