package hcltext

import (
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

func TestNumberChanged(t *testing.T) {
	for _, tc := range []struct {
		src, becomes string
		changed      bool
	}{
		{`123`, "123", false},
		{`-2`, "-2", false},
		{`0.5`, "0.5", false},
		{`12345678901234567890`, "12345678901234567890", false},
		{`007`, "7", true},
		{`1.10`, "1.1", true},
		{`1e3`, "1000", true},
		{`1 + 1`, "2", true},
		{`"007"`, "", false}, // text already
		{`true`, "", false},
	} {
		expr, diags := hclsyntax.ParseExpression([]byte(tc.src), "x.hcl", hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatalf("%s: %v", tc.src, diags)
		}
		v, diags := expr.Value(nil)
		if diags.HasErrors() {
			t.Fatalf("%s: %v", tc.src, diags)
		}
		written, becomes, changed := NumberChanged([]byte(tc.src), expr, v)
		if changed != tc.changed || changed && (written != tc.src || becomes != tc.becomes) {
			t.Errorf("%s: %q, %q, %v; want %q, %v", tc.src, written, becomes, changed, tc.becomes, tc.changed)
		}
	}
}
