package nomad

import (
	"fmt"
	"testing"
)

// FuzzParseVersion reads any string as the version a Nomad agent reports.
// No input may panic; what parses has three non-negative numbers,
// prints back (without its suffixes) to the same release, and orders
// strictly: never before itself, a prerelease just before its release.
func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{MinVersion, "1.11.3", "v1.11.2-dev", "1.11.2+ent", "1.11.2-beta.1+ent",
		" 1.11.2\n", "1.11", "1.11.2.1", "99999999999999999999.0.0", "-1.0.0", "1.011.2", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseVersion(s)
		if err != nil {
			return
		}
		for _, n := range v.n {
			if n < 0 {
				t.Fatalf("%q: a negative number in %v", s, v.n)
			}
		}
		release, err := parseVersion(fmt.Sprintf("%d.%d.%d", v.n[0], v.n[1], v.n[2]))
		if err != nil || release.n != v.n || release.prerelease {
			t.Fatalf("%q printed back as %v, %v", s, release, err)
		}
		if v.less(v) || release.less(v) || v.less(release) != v.prerelease {
			t.Fatalf("%q: the order is not strict around its release", s)
		}
	})
}
