package membership

import (
	"bytes"
	"context"
	"log"
	"log/slog"
)

// memberlistLogger turns memberlist's log lines ("[WARN] memberlist:
// ...") into records of l at the level the line names.
func memberlistLogger(l *slog.Logger) *log.Logger {
	return log.New(logBridge{l}, "", 0)
}

type logBridge struct{ l *slog.Logger }

// levelPrefixes are memberlist's level tags, most frequent first.
var levelPrefixes = []struct {
	tag   string
	level slog.Level
}{
	{"[DEBUG] ", slog.LevelDebug},
	{"[INFO] ", slog.LevelInfo},
	{"[WARN] ", slog.LevelWarn},
	{"[ERR] ", slog.LevelError},
	{"[ERROR] ", slog.LevelError},
}

// Write logs one line; log.Logger calls it once per line.
func (b logBridge) Write(p []byte) (int, error) {
	msg, level := parseMemberlistLine(p)
	ctx := context.Background()
	if b.l.Enabled(ctx, level) {
		b.l.Log(ctx, level, msg, "from", "memberlist")
	}
	return len(p), nil
}

// parseMemberlistLine splits a line into its message and level; a line
// without a known tag is a warning, so that nothing unexpected is lost.
func parseMemberlistLine(p []byte) (string, slog.Level) {
	line := bytes.TrimRight(p, "\n")
	for _, lp := range levelPrefixes {
		if rest, ok := bytes.CutPrefix(line, []byte(lp.tag)); ok {
			return string(rest), lp.level
		}
	}
	return string(line), slog.LevelWarn
}
