package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/loomwork/loomwork/collector/spool"
)

// runSpool is `loom-eval spool repair DIR`: when serve refuses to start
// because its spool is corrupt before the tail (a disk error, not a crash:
// torn tails are repaired on open), this cuts the spool at the first bad
// record, naming what is lost, so serve can start again.
func (m *Main) runSpool(_ context.Context, args []string) error {
	if len(args) == 0 || isHelp(args[0]) || (args[0] == "repair" && len(args) == 2 && isHelp(args[1])) {
		fmt.Fprintln(m.Stderr, "Usage: loom-eval spool repair DIR")
		fmt.Fprintln(m.Stderr, "Cuts a corrupt spool at its first bad record and deletes the segments after it; prints the bytes lost.")
		if len(args) == 0 {
			return usageError("spool: want a subcommand: spool repair DIR")
		}
		return nil
	}
	if args[0] != "repair" {
		return usageError("spool: unknown subcommand %q (want repair)", args[0])
	}
	if len(args) != 2 {
		return usageError("spool repair: want exactly one spool directory, got %q", args[1:])
	}
	log := slog.New(slog.NewTextHandler(m.Stderr, nil))
	lost, err := spool.Repair(args[1], log)
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("spool repair %s: %w", args[1], err)}
	}
	fmt.Fprintf(m.Stdout, "spool %s repaired: %d bytes of records after the first bad one removed\n", args[1], lost)
	return nil
}
