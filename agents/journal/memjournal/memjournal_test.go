package memjournal_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaltest"
	"github.com/loomwork/loomwork/agents/journal/memjournal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	journaltest.Suite{
		Open: func(*testing.T, string) journal.Journal { return memjournal.New(memjournal.Config{}) },
	}.Run(t)
}
