package texttable

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

var cols = []Column{
	{Header: "ID"},
	{Header: "NAME", Min: 6},
	{Header: "NOTE", Min: 6, Drop: 1},
	{Header: "N", Drop: 2},
}

var rows = [][]string{
	{"a1", "invoke_agent researcher", "a long note that goes on and on", "7"},
	{"b2", "chat", "short", "12"},
}

func write(t *testing.T, width int) string {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, cols, rows, width); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestATableWithoutALimitShowsEveryValueWhole(t *testing.T) {
	out := write(t, 0)
	for _, want := range []string{"invoke_agent researcher", "a long note that goes on and on", "12"} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
}

func TestATableFitsItsWidthByCuttingThenDropping(t *testing.T) {
	for _, width := range []int{60, 40, 30, 22, 21, 18, 17, 10} {
		out := write(t, width)
		for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if n := utf8.RuneCountInString(line); n > width && width >= 10 {
				t.Errorf("width %d: line of %d characters: %q", width, n, line)
			}
			if strings.HasSuffix(line, " ") {
				t.Errorf("width %d: trailing space in %q", width, line)
			}
		}
	}
	// Cut first, with an ellipsis; then N goes, then NOTE.
	if out := write(t, 40); !strings.Contains(out, "…") || !strings.Contains(out, "12") {
		t.Errorf("width 40: want cut values and every column:\n%s", out)
	}
	// Every cut made, 22 characters: 21 leaves N out, 17 NOTE too.
	if out := write(t, 22); !strings.HasPrefix(out, "ID  NAME    NOTE    N\n") {
		t.Errorf("width 22: want every column at its narrowest:\n%s", out)
	}
	if out := write(t, 21); strings.Join(strings.Fields(strings.SplitN(out, "\n", 2)[0]), " ") != "ID NAME NOTE" {
		t.Errorf("width 21: want N dropped and NOTE kept:\n%s", out)
	}
	if out := write(t, 17); !strings.HasPrefix(out, "ID  NAME\n") {
		t.Errorf("width 17: want NOTE dropped too:\n%s", out)
	}
}

func TestAColumnThatMayNotBeCutOrDroppedIsKeptWhole(t *testing.T) {
	out := write(t, 5)
	if out != "ID  NAME\na1  invok…\nb2  chat\n" {
		t.Errorf("width 5:\n%s", out)
	}
}
