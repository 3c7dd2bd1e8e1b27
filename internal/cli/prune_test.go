package cli

import (
	"testing"
	"time"
)

func TestParseAge(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "7d", want: 7 * 24 * time.Hour},
		{in: "1d12h", want: 36 * time.Hour},
		{in: "36h", want: 36 * time.Hour},
		{in: "90m", want: 90 * time.Minute},
		{in: "0d", bad: true},
		{in: "0", bad: true},
		{in: "-1h", bad: true},
		{in: "-1d", bad: true},
		{in: "d", bad: true},
		{in: "1.5d", bad: true},
		{in: "7days", bad: true},
		{in: "1d-1h", bad: true},
		{in: "", bad: true},
	} {
		got, err := parseAge(c.in)
		if c.bad != (err != nil) || !c.bad && got != c.want {
			t.Errorf("parseAge(%q) = %v, %v", c.in, got, err)
		}
	}
}
