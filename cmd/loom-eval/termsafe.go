package main

import (
	"fmt"
	"io"
	"unicode/utf8"
)

// termSafe wraps a terminal-bound writer of human output: names and
// messages in it come from spans anyone can send, and a control character
// there (ESC starting an escape sequence, a C1 CSI, a carriage return, a
// backspace) would let a sender move the cursor, rewrite lines or set the
// window title of whoever reads the output. Every such character is
// written as a visible escape (\x1b, \u009b); tab and newline, which the
// output's own layout uses, pass. JSON output is not wrapped: encoding/json
// escapes control characters itself.
func termSafe(w io.Writer) io.Writer { return termWriter{w} }

type termWriter struct{ w io.Writer }

func (t termWriter) Write(p []byte) (int, error) {
	clean := true
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRune(p[i:])
		if unsafeRune(r, size) {
			clean = false
			break
		}
		i += size
	}
	if clean {
		return t.w.Write(p)
	}
	out := make([]byte, 0, len(p)+16)
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRune(p[i:])
		switch {
		case !unsafeRune(r, size):
			out = append(out, p[i:i+size]...)
		case r == utf8.RuneError && size == 1:
			out = fmt.Appendf(out, `\x%02x`, p[i])
		case r < 0x80:
			out = fmt.Appendf(out, `\x%02x`, r)
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += size
	}
	if _, err := t.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// unsafeRune: a C0 control other than tab and newline, DEL, a C1 control,
// or a byte that is not UTF-8 (a terminal may read a lone 0x9b as CSI).
func unsafeRune(r rune, size int) bool {
	switch {
	case r == '\t' || r == '\n':
		return false
	case r < 0x20 || r == 0x7f:
		return true
	case r >= 0x80 && r <= 0x9f:
		return true
	case r == utf8.RuneError && size == 1:
		return true
	}
	return false
}
