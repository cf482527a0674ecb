package gossip

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Settings every replica must hold alike, though nothing refuses a
// replica whose differ: only the leader backs up and launches, so a
// replica with another backup target or Nomad namespace silently backs
// up, or launches, elsewhere while it leads. Each replica gossips a
// fingerprint of each such setting in its meta; one that hears a peer's
// differ from its own says so (the log, Differing), once per change. A
// difference is never refused: a rolling change of a setting passes
// through one.

// FingerprintBytes is the length of a setting's fingerprint: enough that
// two values differ in their fingerprints but for a 2^-64 chance.
const FingerprintBytes = 8

// MaxSettingCode bounds a setting's code, and so how many there may be.
const MaxSettingCode = 31

// Fingerprint is a setting's value hashed: the value itself (a URL may
// hold credentials) is never gossiped.
type Fingerprint [FingerprintBytes]byte

// Setting is one setting every replica must hold alike.
type Setting struct {
	// Code names it in the meta, 1 to MaxSettingCode: once given to a
	// setting, never to another (replicas of two versions compare by it).
	Code uint8
	// Name is the setting as operators write it ("backup.url").
	Name string
	// Value is what this replica holds: hashed here, never gossiped nor
	// logged.
	Value string
}

// fingerprintOf hashes a setting's value under its code (the same text
// for two settings is not the same fingerprint).
func fingerprintOf(code uint8, value string) Fingerprint {
	sum := sha256.Sum256([]byte("paxcron shared setting\x00" + strconv.Itoa(int(code)) + "\x00" + value))
	return Fingerprint(sum[:FingerprintBytes])
}

// settingSums are the fingerprints a replica published, by code. It is
// comparable, so that a Peer is.
type settingSums struct {
	published uint32 // bit c: code c is published
	sums      [MaxSettingCode + 1]Fingerprint
}

func (s *settingSums) set(code uint8, sum Fingerprint) {
	s.published |= 1 << code
	s.sums[code] = sum
}

func (s *settingSums) get(code uint8) (Fingerprint, bool) {
	if code > MaxSettingCode || s.published&(1<<code) == 0 {
		return Fingerprint{}, false
	}
	return s.sums[code], true
}

func (s *settingSums) count() int {
	n := 0
	for code := uint8(1); code <= MaxSettingCode; code++ {
		if _, ok := s.get(code); ok {
			n++
		}
	}
	return n
}

// sumsOf are the fingerprints of settings, which must each have a code
// from 1 to MaxSettingCode, no two the same code or name.
func sumsOf(settings []Setting) (settingSums, error) {
	var s settingSums
	names := map[string]bool{}
	for _, x := range settings {
		switch {
		case x.Code == 0 || x.Code > MaxSettingCode:
			return s, fmt.Errorf("setting %q has code %d, want 1 to %d", x.Name, x.Code, MaxSettingCode)
		case x.Name == "":
			return s, fmt.Errorf("setting %d has no name", x.Code)
		case names[x.Name]:
			return s, fmt.Errorf("setting %q twice", x.Name)
		}
		if _, dup := s.get(x.Code); dup {
			return s, fmt.Errorf("setting code %d twice", x.Code)
		}
		names[x.Name] = true
		s.set(x.Code, fingerprintOf(x.Code, x.Value))
	}
	return s, nil
}

// Differing is a peer whose shared settings differ from this replica's.
type Differing struct {
	Peer uint64
	// Settings are the names of those that differ, in code order.
	Settings []string
}

// differingFrom are the names of this replica's settings that p
// published with another fingerprint (one it does not publish, as a
// replica of a version before, is not compared).
func (g *Gossip) differingFrom(p Peer) []string {
	var names []string
	for _, x := range g.settings {
		ours, _ := g.self.settings.get(x.Code)
		if theirs, ok := p.settings.get(x.Code); ok && theirs != ours {
			names = append(names, x.Name)
		}
	}
	return names
}

// noteSettings notes which of p's settings differ from this replica's;
// changed says whether that differs from what was noted before. Called
// with g.mu held.
func (g *Gossip) noteSettings(p Peer) (before, now []string, changed bool) {
	now, before = g.differingFrom(p), g.differ[p.ID]
	if slices.Equal(now, before) {
		return before, now, false
	}
	if len(now) == 0 {
		delete(g.differ, p.ID)
	} else {
		g.differ[p.ID] = now
	}
	return before, now, true
}

// logSettings says that a peer's shared settings differ, or agree again:
// once per change, not per gossip round.
func (g *Gossip) logSettings(peer uint64, before, now []string) {
	if len(now) == 0 {
		g.log.Info("a peer's shared settings now match this replica's", "peer", peer, "differed", strings.Join(before, ","))
		return
	}
	g.log.Warn(fmt.Sprintf("replica %d's %s differ from this replica's: only the leader backs up and launches, so where backups go and where jobs launch depends on which replica leads; "+
		"give every replica the same (during a rolling change of them this is expected until the last replica restarts)", peer, strings.Join(now, ", ")),
		"peer", peer, "settings", strings.Join(now, ","))
}

// Differing returns the alive peers whose shared settings differ from
// this replica's, by ID.
func (g *Gossip) Differing() []Differing {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Differing, 0, len(g.differ))
	//detlint:maprange sorted below
	for id, names := range g.differ {
		out = append(out, Differing{Peer: id, Settings: slices.Clone(names)})
	}
	slices.SortFunc(out, func(a, b Differing) int { return cmp.Compare(a.Peer, b.Peer) })
	return out
}
