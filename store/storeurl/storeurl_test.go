package storeurl

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseNamesTheBackendAndRejectsUnknownSchemes(t *testing.T) {
	for in, want := range map[string]Location{
		"":                                   {Backend: SQLite, Path: DefaultPath},
		"traces.db":                          {Backend: SQLite, Path: "traces.db"},
		"/var/lib/loomwork/traces.db":        {Backend: SQLite, Path: "/var/lib/loomwork/traces.db"},
		"sqlite:data/t.db":                   {Backend: SQLite, Path: "data/t.db"},
		"sqlite:///abs/t.db":                 {Backend: SQLite, Path: "/abs/t.db"},
		"file:t.db":                          {Backend: SQLite, Path: "t.db"},
		"clickhouse://127.0.0.1:9000/traces": {Backend: ClickHouse, DSN: "clickhouse://127.0.0.1:9000/traces"},
	} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"postgres://db/x":      `unknown scheme "postgres"`,
		"sqlite:":              "missing the database file path",
		"sqlite:t.db?mode=ro":  "no query",
		"clickhouse:127.0.0.1": "want clickhouse://HOST:PORT/DATABASE",
	} {
		if _, err := Parse(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) error = %v, want one containing %q", in, err, want)
		}
	}
}

func TestLocationStringHidesPasswords(t *testing.T) {
	l := Location{Backend: ClickHouse, DSN: "clickhouse://user:secret@127.0.0.1:9000/db"}
	if s := l.String(); strings.Contains(s, "secret") || !strings.Contains(s, "user:***@127.0.0.1") {
		t.Errorf("String() = %q", s)
	}
}

func TestOpenEmbeddedStoreReadWriteThenReadOnly(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.db")
	if _, err := Open(ctx, "sqlite:"+path, true); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("read-only open of a missing store: %v, want a no-such-file error", err)
	}
	st, err := Open(ctx, path, false)
	if err != nil {
		t.Fatal(err)
	}
	st.Shutdown(context.Background())
	ro, err := Open(ctx, "file:"+path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Shutdown(context.Background())
	if err := ro.WriteSpans(ctx, nil); err != nil {
		t.Logf("empty write on a read-only store: %v", err)
	}
}
