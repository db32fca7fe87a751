package people

import (
	"slices"
	"testing"
)

// Groups map to every role they hold; a group no role names gives none.
func TestRolesFor(t *testing.T) {
	o := &OIDC{Roles: Roles{Admins: []string{"gw-admins"}, Reviewers: []string{"sec"},
		TeamOwners:    map[string][]string{"data": {"ds-leads"}, "web": {"web-leads"}},
		TeamReviewers: map[string][]string{"data": {"ds", "ds-leads"}, "web": {"web"}}}}
	cases := []struct {
		groups []string
		want   Held
		role   string
	}{
		{[]string{"gw-admins"}, Held{Admin: true}, "admin"},
		{[]string{"sec", "other"}, Held{Reviewer: true}, "reviewer"},
		{[]string{"ds-leads", "web"}, Held{TeamOwner: []string{"data"}, TeamReviewer: []string{"data", "web"}}, "team_owner"},
		{[]string{"ds"}, Held{TeamReviewer: []string{"data"}}, "team_reviewer"},
		{[]string{"GW-ADMINS", "marketing"}, Held{}, ""},
		{nil, Held{}, ""},
	}
	for _, tc := range cases {
		got := o.RolesFor(tc.groups)
		if got.Admin != tc.want.Admin || got.Reviewer != tc.want.Reviewer || !slices.Equal(got.TeamOwner, tc.want.TeamOwner) ||
			!slices.Equal(got.TeamReviewer, tc.want.TeamReviewer) {
			t.Errorf("RolesFor(%q) = %+v, want %+v", tc.groups, got, tc.want)
		}
		if got.Any() != (tc.role != "") || (tc.role != "" && got.Role() != tc.role) {
			t.Errorf("RolesFor(%q): any %v role %s", tc.groups, got.Any(), got.Role())
		}
	}
}

func TestIssuerOK(t *testing.T) {
	for s, want := range map[string]bool{
		"https://login.example.org": true, "https://login.example.org/realms/x": true,
		"http://127.0.0.1:5556": true, "http://localhost:8080": true,
		"http://login.example.org": false, "https://x/?a=b": false, "login.example.org": false, "": false, "ftp://x": false,
	} {
		if issuerOK(s) != want {
			t.Errorf("issuerOK(%q) = %v", s, !want)
		}
	}
}

// A flow survives its cookie; a cookie the gateway did not write is
// refused, never half read.
func TestFlowCookie(t *testing.T) {
	f := NewFlow("/review/queue")
	got, err := DecodeFlow(f.Encode())
	if err != nil || got != f {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if g := NewFlow(""); g.State == f.State || g.Nonce == f.Nonce || g.Verifier == f.Verifier {
		t.Fatal("two flows share a secret")
	}
	for _, bad := range []string{"", "!!", "e30", "eyJzIjoiYSJ9", "eyJzIjoiYSIsIm4iOiJiIiwidiI6ImMiLCJ6IjoxfQ"} {
		if _, err := DecodeFlow(bad); err == nil {
			t.Errorf("DecodeFlow(%q) accepted", bad)
		}
	}
}

func FuzzDecodeFlow(f *testing.F) {
	f.Add(NewFlow("/review/x").Encode())
	f.Add("eyJzIjoiYSJ9")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := DecodeFlow(s)
		if err == nil && (got.State == "" || got.Nonce == "" || got.Verifier == "") {
			t.Fatalf("accepted a flow without its secrets: %+v", got)
		}
	})
}
