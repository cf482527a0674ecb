// Package hcltext holds the checks paxcron makes where it reads an HCL
// value as text: cron files (cron/cronfile) and the server's
// configuration (cmd/paxcron).
package hcltext

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// NumberChanged reports a value v, written as a number by expr in src,
// whose written text is not the string it becomes: HCL turns a number
// into text in its shortest form, so `1.10` becomes "1.1", `007` "7"
// and `1e3` "1000", other text than written, without a word (found in
// review in cron files, where `version = 1.10` in meta reached Nomad as
// "1.1"). A number whose text is its shortest form (`123`) is not
// changed. written is expr's text and becomes the string; a value that
// is not a number, or whose range is not in src, is never changed.
func NumberChanged(src []byte, expr hcl.Expression, v cty.Value) (written, becomes string, changed bool) {
	if !v.IsKnown() || v.IsNull() || v.Type() != cty.Number {
		return "", "", false
	}
	s, err := convert.Convert(v, cty.String)
	if err != nil || s.IsNull() || !s.IsKnown() {
		return "", "", false
	}
	r := expr.Range()
	if r.Start.Byte < 0 || r.End.Byte > len(src) || r.Start.Byte > r.End.Byte {
		return "", "", false
	}
	written, becomes = string(src[r.Start.Byte:r.End.Byte]), s.AsString()
	return written, becomes, written != becomes
}
