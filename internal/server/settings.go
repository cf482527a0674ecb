package server

import (
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"paxcron/internal/gossip"
)

// Codes of the shared settings in gossip's meta: once given, never given
// to another setting, since replicas of two versions compare by them.
const (
	settingBackupURL        = 1
	settingBackupKeep       = 2
	settingNomadAddress     = 3
	settingNomadRegion      = 4
	settingNomadNamespace   = 5
	settingNomadGCThreshold = 6
)

// defaultBackupTarget is the default backup target's value as replicas
// compare it.
const defaultBackupTarget = "the default: each replica's own data_dir/backups"

// sharedSettings are the settings every replica must hold alike for the
// cluster to behave the same whoever leads, which nothing else compares
// (the members and the timing are bound by the transport's handshake):
// only the leader backs up and launches, so a replica with another
// backup target backs up there while it leads, and one with another
// Nomad address, region or namespace launches into another place (and
// Nomad's idempotency token, scoped by namespace and region, no longer
// keeps a launch retried across a failover from running twice). The
// GC threshold sets how far back a new leader trusts Nomad to remember
// a launch; backup.keep how many backups the leader keeps. Gossip
// publishes their fingerprints and says when a peer's differ; it
// refuses nothing, since a rolling change of one passes through a
// difference. A value is written as the replica acts on it: the default
// backup target (a folder beside each replica's own store) is "the
// default" whatever its path, and an empty namespace is Nomad's
// "default".
func sharedSettings(c Config) []gossip.Setting {
	backupURL := c.Backup
	if c.BackupDefault {
		backupURL = defaultBackupTarget
	}
	namespace := c.Nomad.Namespace
	if namespace == "" {
		namespace = "default"
	}
	return []gossip.Setting{
		{Code: settingBackupURL, Name: "backup.url", Value: backupURL},
		{Code: settingBackupKeep, Name: "backup.keep", Value: strconv.Itoa(c.BackupKeep)},
		{Code: settingNomadAddress, Name: "nomad.address", Value: nomadAddressAsCompared(c.Nomad.Address)},
		{Code: settingNomadRegion, Name: "nomad.region", Value: c.Nomad.Region},
		{Code: settingNomadNamespace, Name: "nomad.namespace", Value: namespace},
		{Code: settingNomadGCThreshold, Name: "nomad.gc_threshold", Value: c.Nomad.JobGCThreshold.String()},
	}
}

// nomadAddressAsCompared is a Nomad address (validated: http, https or
// unix, the scheme required) written so that two spellings of the same
// agent compare alike: the scheme and host in lower case (url.Parse
// lowers the scheme; host names are case-blind), the port made explicit
// as the Nomad client dials it (a URL's host as written, so net/http's
// 80 or 443 when none is given, not Nomad's 4646), and no trailing
// slash. Credentials in the URL are left out, as the token is: they
// say who calls, not which Nomad. A unix socket is its path alone (the
// client dials the path whatever the host). An address that does not
// parse is compared as written.
func nomadAddressAsCompared(address string) string {
	u, err := url.Parse(address)
	if err != nil {
		return address
	}
	switch u.Scheme {
	case "unix":
		return "unix://" + strings.TrimRight(u.Path, "/")
	case "http", "https":
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		return u.Scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
	}
	return strings.TrimRight(address, "/")
}

// sharedSettingNames are sharedSettings' names, in code order.
func sharedSettingNames() []string {
	var names []string
	for _, s := range sharedSettings(Config{}) {
		names = append(names, s.Name)
	}
	return names
}

// peersDiffering counts the peers in differ whose setting name differs.
func peersDiffering(differ []gossip.Differing, name string) int {
	n := 0
	for _, d := range differ {
		if slices.Contains(d.Settings, name) {
			n++
		}
	}
	return n
}

// settingsDiffer are the peers whose shared settings differ from this
// replica's, as gossip heard them; nil without gossip.
func (s *Server) settingsDiffer() []gossip.Differing {
	if g := s.gossipRef.Load(); g != nil {
		return g.Differing()
	}
	return nil
}
