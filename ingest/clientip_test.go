package ingest

import "testing"

func TestAddressKey(t *testing.T) {
	for _, c := range []struct {
		ip   string
		bits int
		want string
	}{
		{"203.0.113.7", 64, "203.0.113.7"},
		{"::ffff:203.0.113.7", 64, "::ffff:203.0.113.7"},
		{"2001:db8:1:2:aaaa::1", 64, "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff:ffff:ffff:ffff", 64, "2001:db8:1:2::/64"},
		{"2001:db8:1:2:aaaa::1", 48, "2001:db8:1::/48"},
		{"2001:db8:1:2:aaaa::1", 128, "2001:db8:1:2:aaaa::1"},
		{"fe80::1%eth0", 64, "fe80::/64"},
		{"not an ip", 64, "not an ip"},
		{"", 64, ""},
	} {
		if got := AddressKey(c.ip, c.bits); got != c.want {
			t.Errorf("AddressKey(%q, %d) = %q, want %q", c.ip, c.bits, got, c.want)
		}
	}
}
