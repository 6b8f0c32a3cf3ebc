// Package reliability holds the reliability suite of issue 17: each row of
// the table reproduced against `loom-eval serve` run as a
// subprocess (so kill -9 is real), with the official OTel Go exporter as
// the sender, counted span by span: sent, acknowledged, stored,
// duplicated, lost among the acknowledged and never stored, plus serve's
// RSS (VmHWM and sampled VmRSS from /proc) and every status the senders
// saw. ClickHouse runs as a private child process (internal/chlocal) that
// the outage rows kill, stop and restart on its data directory.
//
// The package is tests only. The figures in docs/reliability.md are
// written by the suite itself:
//
//	go test ./internal/reliability -run . -v -count=1 -timeout 30m -args -reliability.report docs/reliability.md
package reliability
