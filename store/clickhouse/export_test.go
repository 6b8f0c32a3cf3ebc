package clickhouse

import ch "github.com/ClickHouse/clickhouse-go/v2"

func parseDSNForTest(dsn string) (*ch.Options, error) { return ch.ParseDSN(dsn) }
