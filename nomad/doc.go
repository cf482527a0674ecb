// Package nomad owns dispatch and look-up of launches against Nomad through
// github.com/hashicorp/nomad/api, and HCL intake. It arrives with issue 4.
package nomad
