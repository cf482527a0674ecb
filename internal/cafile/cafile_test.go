package cafile

import (
	"bytes"
	"encoding/pem"
	"slices"
	"strings"
	"testing"
	"time"

	"paxcron/internal/testcert"
)

// testCA is a self-signed CA certificate named name, PEM.
func testCA(t testing.TB, name string) []byte {
	t.Helper()
	return testcert.NewCA(t, name, time.Now().Add(time.Hour)).PEM()
}

func TestParse(t *testing.T) {
	a, b, c := testCA(t, "a"), testCA(t, "b"), testCA(t, "c")
	noBreak := bytes.TrimSuffix(b, []byte("\n"))
	for _, tc := range []struct {
		name string
		file []byte
		want []string // the CAs' names; nil: refused
		err  string
	}{
		{"one", a, []string{"a"}, ""},
		{"two", slices.Concat(a, b), []string{"a", "b"}, ""},
		{"comments around", slices.Concat([]byte("# old\n"), a, []byte("\n# new\n"), b, []byte("# end\n")), []string{"a", "b"}, ""},
		{"a line break missing", slices.Concat(a, noBreak, c), nil, "3 BEGIN lines but 1 certificates"},
		{"the first line break missing", slices.Concat(bytes.TrimSuffix(a, []byte("\n")), b), nil, "2 BEGIN lines but 0"},
		{"a key", slices.Concat(a, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte{1}})), nil, "block 2 is a EC PRIVATE KEY"},
		{"not a certificate", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2}}), nil, "certificate 1:"},
		{"empty", nil, nil, "holds no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cas, err := Parse("ca.pem", tc.file)
			if tc.want == nil {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Parse: %d CAs, %v; want an error saying %q", len(cas), err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ca := range cas {
				got = append(got, ca.Subject.CommonName)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("CAs %v, want %v", got, tc.want)
			}
		})
	}
}

// FuzzParse: any file is read or refused, never half read: without an
// error, every BEGIN line gave a certificate.
func FuzzParse(f *testing.F) {
	ca := testCA(f, "a")
	f.Add(ca)
	f.Add(slices.Concat(ca, ca))
	f.Add(slices.Concat(bytes.TrimSuffix(ca, []byte("\n")), ca))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cas, err := Parse("fuzz", b)
		if err != nil {
			return
		}
		if len(cas) == 0 || len(cas) != bytes.Count(b, []byte("-----BEGIN ")) {
			t.Fatalf("%d CAs from a file with %d BEGIN lines", len(cas), bytes.Count(b, []byte("-----BEGIN ")))
		}
	})
}
