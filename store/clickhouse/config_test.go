package clickhouse

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidateNamesTheBadField(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"missing dsn", Config{}, []string{"dsn: must be set"}},
		{"bad database", Config{DSN: "clickhouse://127.0.0.1:9000", Database: "my-db"}, []string{`database: "my-db"`}},
		{"bad cluster", Config{DSN: "clickhouse://127.0.0.1:9000", Cluster: "a b"}, []string{`cluster: "a b"`}},
		{"negative ttl", Config{DSN: "clickhouse://127.0.0.1:9000", TTL: -time.Hour}, []string{"ttl: must not be negative"}},
		{"ttl not in days", Config{DSN: "clickhouse://127.0.0.1:9000", TTL: 36 * time.Hour}, []string{"ttl: must be a whole number of days"}},
		{"dsn without host", Config{DSN: "clickhouse:///db"}, []string{"dsn: parse dsn address failed"}},
		{"dsn with bad parameter", Config{DSN: "clickhouse://127.0.0.1:9000/db?dial_timeout=soon"}, []string{"dsn:", "dial timeout"}},
		{"dsn database not an identifier", Config{DSN: "clickhouse://127.0.0.1:9000/a;b"}, []string{`dsn: database "a;b"`}},
		{"unknown coordinator", Config{DSN: "clickhouse://127.0.0.1:9000", Cluster: "lw", Coordinator: "raft"}, []string{`coordinator: "raft" is not`}},
		{"coordinator without cluster", Config{DSN: "clickhouse://127.0.0.1:9000", Coordinator: CoordinatorNone}, []string{`coordinator: "none" needs a cluster`}},
		{"several problems at once", Config{Database: "1x", TTL: -1}, []string{"dsn: must be set", `database: "1x"`, "ttl:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if err == nil {
				t.Fatalf("Validate accepted %+v", tc.cfg)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	for _, ok := range []Config{
		{DSN: "clickhouse://127.0.0.1:9000/loomwork"},
		{DSN: "clickhouse://u:p@10.0.0.1:9000,10.0.0.2:9000/loomwork?compress=lz4", Cluster: "prod.cluster-1", TTL: 30 * 24 * time.Hour},
		{DSN: "http://127.0.0.1:8123", Database: "traces"},
	} {
		if err := ok.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", ok, err)
		}
	}
}

func TestDatabaseComesFromConfigThenDSNThenDefault(t *testing.T) {
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{DSN: "clickhouse://h:9000/fromdsn", Database: "fromcfg"}, "fromcfg"},
		{Config{DSN: "clickhouse://h:9000/fromdsn"}, "fromdsn"},
		{Config{DSN: "clickhouse://h:9000"}, "default"},
	}
	for _, c := range cases {
		opts, err := parseDSNForTest(c.cfg.DSN)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.cfg.database(opts); got != c.want {
			t.Errorf("database(%q, %q) = %q, want %q", c.cfg.DSN, c.cfg.Database, got, c.want)
		}
	}
}

func TestConfigFromDSNTakesTheStoreParametersOut(t *testing.T) {
	cfg, err := ConfigFromDSN("clickhouse://a:9000,b:9000/lw?cluster=c1&cluster_coordinator=none&connection_open_strategy=round_robin")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Cluster != "c1" || cfg.Coordinator != CoordinatorNone {
		t.Errorf("cluster %q, coordinator %q", cfg.Cluster, cfg.Coordinator)
	}
	if strings.Contains(cfg.DSN, "cluster") || !strings.Contains(cfg.DSN, "connection_open_strategy=round_robin") || !strings.HasPrefix(cfg.DSN, "clickhouse://a:9000,b:9000/lw?") {
		t.Errorf("DSN left for the driver: %s", cfg.DSN)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	plain := "clickhouse://127.0.0.1:9000/db?compress=lz4"
	if cfg, err := ConfigFromDSN(plain); err != nil || cfg.DSN != plain || cfg.Cluster != "" {
		t.Errorf("a DSN without store parameters changed: %+v, %v", cfg, err)
	}
	if _, err := ConfigFromDSN("clickhouse://%zz"); err == nil {
		t.Error("a malformed DSN was accepted")
	}
}
