package configs

import (
	"io"
	"os"

	"github.com/rs/zerolog"
	"golang.org/x/term"
)

// Logger returns the logger this configuration describes, writing to w:
// level (info if empty or unknown) and format (json, or console; empty picks
// console on a terminal, json otherwise).
func (c Log) Logger(w io.Writer) zerolog.Logger {
	lvl, err := zerolog.ParseLevel(c.Level)
	if err != nil || lvl == zerolog.NoLevel { // "" parses as NoLevel, which would drop every message below it
		lvl = zerolog.InfoLevel
	}
	format := c.Format
	if format == "" {
		format = "json"
		if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			format = "console"
		}
	}
	if format == "console" {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05"}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger()
}
