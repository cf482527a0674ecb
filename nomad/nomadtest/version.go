package nomadtest

import (
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MinVersion is the oldest Nomad the tests accept. Before 1.11.2,
// concurrent dispatches with one idempotency token could create several
// children, which is the property paxcron's exactly-once launch rests on.
const MinVersion = "1.11.2"

var versions sync.Map // binary path -> versionResult

type versionResult struct {
	version string
	err     error
}

// CheckVersion runs `<bin> version` and returns the version it prints
// (e.g. "1.11.3"), or an error if it cannot be read or is older than
// MinVersion. The answer is kept per binary.
func CheckVersion(bin string) (string, error) {
	if r, ok := versions.Load(bin); ok {
		return r.(versionResult).version, r.(versionResult).err
	}
	var r versionResult
	cmd := exec.Command(bin, "version")
	cmd.Env = agentEnv()
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.err = fmt.Errorf("nomadtest: `%s version`: %v\n%s", bin, err, out)
	} else {
		r.version, r.err = checkVersionOutput(string(out))
		if r.err != nil {
			r.err = fmt.Errorf("nomadtest: %s: %w", bin, r.err)
		}
	}
	versions.Store(bin, r)
	return r.version, r.err
}

var versionLine = regexp.MustCompile(`(?m)^Nomad v(\d+)\.(\d+)\.(\d+)(-[0-9A-Za-z.-]+)?(\+\S+)?`)

// checkVersionOutput reads the output of `nomad version` and refuses a
// version older than MinVersion. A prerelease is older than its release
// (1.11.2-dev < 1.11.2), as in semantic versioning.
func checkVersionOutput(out string) (string, error) {
	m := versionLine.FindStringSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("cannot read a version in the output of `nomad version`: %q", strings.TrimSpace(out))
	}
	version := strings.TrimPrefix(m[0], "Nomad v")
	var got [3]int
	for i := range got {
		got[i], _ = strconv.Atoi(m[i+1])
	}
	least := [3]int{1, 11, 2}
	older := got[0] < least[0] ||
		got[0] == least[0] && (got[1] < least[1] ||
			got[1] == least[1] && (got[2] < least[2] || got[2] == least[2] && m[4] != ""))
	if older {
		return version, fmt.Errorf("this is Nomad %s, older than %s, the oldest the tests accept: before 1.11.2 concurrent "+
			"dispatches with one idempotency token could create several children; "+
			"run `make nomad` and point NOMAD_BIN at tools/nomad/bin/nomad", version, MinVersion)
	}
	return version, nil
}
