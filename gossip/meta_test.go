package gossip

import (
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// A node's metadata with every field set to long, realistic values (the
// longest IPv6 addresses, the longest region the deploy files name, a
// replica id made of it) stays under memberlist's limit: over it, the
// node would announce none and be refused by every member.
func TestMetaSizeWithLongValues(t *testing.T) {
	const v6 = "[2001:0db8:85a3:0000:0000:8a2e:0370:7334]"
	m := meta{
		Region:      "ap-southeast-2",
		Replica:     "ap-southeast-2-3f9c2a10",
		Role:        RoleFull,
		HTTP:        v6 + ":65535",
		HTTPS:       true,
		Admin:       v6 + ":65534",
		NATSCluster: v6 + ":65533",
		NATSGateway: v6 + ":65532",
		NATSLeaf:    v6 + ":65531",
		Pub:         "MCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqow", // 44 characters: 32 bytes in base64
		Proto:       Protocol,
		Rel:         release("v10.20.30-rc.4+0123456789abcdef"), // cut to 24 bytes
	}
	if len(m.Pub) != 44 {
		t.Fatalf("the public key is %d characters, want 44", len(m.Pub))
	}
	// Every field set: one added to meta must be added here too.
	rv := reflect.ValueOf(m)
	for i := range rv.NumField() {
		if rv.Field(i).IsZero() {
			t.Fatalf("meta.%s is not set in this test: give it a long realistic value", rv.Type().Field(i).Name)
		}
	}
	b, err := m.encode(memberlist.MetaMaxSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("metadata: %d bytes of %d", len(b), memberlist.MetaMaxSize)
	back, err := decodeMeta(b)
	if err != nil || back != m {
		t.Fatalf("decoded %+v, %v; want %+v", back, err, m)
	}
	// And the check holds: a node whose metadata is over the limit is told.
	m.Region = string(make([]byte, memberlist.MetaMaxSize))
	if _, err := m.encode(memberlist.MetaMaxSize); err == nil {
		t.Fatal("metadata over the limit encoded")
	}
}

// A newer release's metadata fields are ignored, as the releases before
// Admin ignore it: decodeMeta is never strict.
func TestMetaDecodeTakesUnknownFields(t *testing.T) {
	m, err := decodeMeta([]byte(`{"region":"eu-west","replica":"eu-west-1a2b3c4d","role":"edge","admin":"[::]:9100","proto":2,"next_field":{"x":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if m.Region != "eu-west" || m.Role != RoleEdge || m.Admin != "[::]:9100" || m.Proto != 2 {
		t.Fatalf("decoded %+v", m)
	}
	// The metadata of a release before Admin: none announced.
	if m, err := decodeMeta([]byte(`{"region":"eu-west","replica":"r","role":"edge","http":":8080","proto":2}`)); err != nil || m.Admin != "" {
		t.Fatalf("decoded %+v, %v", m, err)
	}
}

// A node's admin address is announced in its metadata and, in every
// member's Members(), an empty or unspecified host is its memberlist
// address (as for the HTTP address); a node without one announces none.
func TestMembersAnnounceAdminAddr(t *testing.T) {
	light := func(c *Config) { c.NATSClusterAddr, c.NATSGatewayAddr, c.NATSLeafAddr = "", "", "" }
	a := startMember(t, "a", "eu-west", nil, func(c *Config) {
		light(c)
		c.HTTPAddr, c.AdminAddr = ":8080", "[::]:9100"
	})
	b := startMember(t, "b", "eu-west", []string{a.GossipAddr()}, func(c *Config) {
		light(c)
		c.Role, c.AdminAddr = RoleEdge, "127.0.0.2:9101"
	})
	c := startMember(t, "c", "us-east", []string{a.GossipAddr()}, light)
	all := []*member{a, b, c}
	waitFor(t, 10*time.Second, "three members everywhere", func() bool {
		return len(a.Members()) == 3 && len(b.Members()) == 3 && len(c.Members()) == 3
	})
	want := map[string][2]string{ // name → HTTP, admin
		"a": {"127.0.0.1:8080", "127.0.0.1:9100"},
		"b": {"127.0.0.1:1", "127.0.0.2:9101"},
		"c": {"127.0.0.1:1", ""},
	}
	for _, at := range all {
		for _, m := range at.Members() {
			if got := [2]string{m.HTTPAddr, m.AdminAddr}; got != want[m.Name] {
				t.Errorf("at %s, member %s: HTTP and admin %q, want %q", at.cfg.NodeName, m.Name, got, want[m.Name])
			}
		}
	}
}
