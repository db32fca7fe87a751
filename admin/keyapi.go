package admin

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/confkit"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/httpx"
)

// KeyView is a key as the API lists it: never the key, nor its hash.
type KeyView struct {
	ID       string     `json:"id"`
	Created  time.Time  `json:"created_at"`
	Expires  *time.Time `json:"expires_at,omitempty"`
	LastUsed *time.Time `json:"last_used_at,omitempty"`
	By       string     `json:"created_by"`
}

// IssuedKey is the answer to an issue: the key, shown this once.
type IssuedKey struct {
	ID      string     `json:"id"`
	Agent   string     `json:"agent"`
	Key     string     `json:"key"`
	Expires *time.Time `json:"expires_at,omitempty"`
}

func (a *API) listKeys(w http.ResponseWriter, r *http.Request) error {
	_, ref, err := a.target(r, false)
	if err != nil {
		return err
	}
	keys, err := a.d.Store.KeysInfo(r.Context(), ref.name)
	if err != nil {
		return stateErr(err)
	}
	out := make([]KeyView, 0, len(keys))
	for _, k := range keys {
		if k.Runtime == (ref.stored != nil) {
			out = append(out, KeyView{ID: k.ID, Created: k.Created, Expires: k.Expires, LastUsed: k.LastUsed, By: k.By})
		}
	}
	httpx.WriteJSON(w, r, http.StatusOK, map[string]any{"agent": ref.name, "keys": out})
	return nil
}

// expiry reads an issue's body: expires_at (RFC 3339) or expires_in
// ("30d" is not a unit: "720h"), in the future; neither: no expiry.
func (a *API) expiry(r *http.Request) (*time.Time, error) {
	raw, err := httpx.ReadLimited(r, maxBody)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil // no body: a key without expiry
	}
	b, err := readBody(raw, []string{"expires_at", "expires_in"}, nil)
	if err != nil {
		return nil, err
	}
	if b.Name != nil {
		return nil, apierror.BadRequest("name", "A key has no name; its id is given to it.")
	}
	return a.expiryOf(b)
}

// expiryOf is the expiry an issue's body asks for.
func (a *API) expiryOf(b body) (*time.Time, error) {
	var at time.Time
	switch rawAt, rawIn := b.Fields["expires_at"], b.Fields["expires_in"]; {
	case rawAt != nil && rawIn != nil:
		return nil, apierror.BadRequest("expires_in", "Give expires_at or expires_in, not both.")
	case rawAt != nil:
		if err := json.Unmarshal(rawAt, &at); err != nil {
			return nil, apierror.BadRequest("expires_at", "expires_at must be an RFC 3339 time.")
		}
	case rawIn != nil:
		var s string
		_ = json.Unmarshal(rawIn, &s)
		d, err := confkit.ParseDuration(s)
		if err != nil {
			return nil, apierror.BadRequest("expires_in", "expires_in: %v.", err)
		}
		at = a.now().Add(d.D())
	default:
		return nil, nil
	}
	if !at.After(a.now()) {
		return nil, apierror.BadRequest("expires_at", "The expiry must be in the future.")
	}
	at = at.UTC()
	return &at, nil
}

func (a *API) issueKey(w http.ResponseWriter, r *http.Request) error {
	p, ref, err := a.target(r, true)
	if err != nil {
		return err
	}
	expires, err := a.expiry(r)
	if err != nil {
		return err
	}
	out, err := a.issue(r, p, ref, expires)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, r, http.StatusCreated, out)
	return nil
}

// issue makes, stores and audits a key of ref. The key is handed out only
// once its audit entry is written: a key nobody can account for is
// revoked again.
func (a *API) issue(r *http.Request, p door.Person, ref agentRef, expires *time.Time) (IssuedKey, error) {
	key, id, sum, err := newKey()
	if err != nil {
		return IssuedKey{}, err
	}
	k := Key{ID: id, Agent: ref.name, Runtime: ref.stored != nil, SHA256: sum, Created: a.now().UTC(), Expires: expires, By: p.Name}
	if err := a.d.Store.AddKey(r.Context(), k); err != nil {
		return IssuedKey{}, stateErr(err)
	}
	err = a.record(r, p, "admin.key.issue", ref.name, func(o *audit.Object) {
		o.Str("key_id", id)
		if expires != nil {
			o.Str("expires_at", expires.Format(time.RFC3339))
		}
	})
	if err != nil {
		_ = a.d.Store.RevokeKey(r.Context(), ref.name, id)
		return IssuedKey{}, err
	}
	return IssuedKey{ID: id, Agent: ref.name, Key: key, Expires: expires}, nil
}

func (a *API) revokeKey(w http.ResponseWriter, r *http.Request) error {
	p, ref, err := a.target(r, true)
	if err != nil {
		return err
	}
	if err := a.revoke(r, p, ref, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) revoke(r *http.Request, p door.Person, ref agentRef, id string) error {
	if err := a.d.Store.RevokeKey(r.Context(), ref.name, id); err != nil {
		return stored(err, "Key", id)
	}
	return a.record(r, p, "admin.key.revoke", ref.name, func(o *audit.Object) { o.Str("key_id", id) })
}
