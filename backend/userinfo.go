package backend

import (
	"net/url"
	"strings"
)

// The display form of a source URL (Parsed.Display, Source.String) shows a
// password as Redacted. A command that dlqctl prints for someone to run
// cannot carry that password, so it names the backend's password variable
// instead; these helpers move between the display form and the forms such
// a command and a resume need.

// userinfoOf splits a display URL around its user info: what comes
// before it ("redis://"), the user name (unescaped), the password as shown
// and whether one is, and what follows the "@" ("h:6379/0?stream=dlq").
// ok is false for a URL without user info.
type userinfoOf struct {
	head, user, password, rest string
	hasPassword, ok            bool
}

func splitUserinfo(display string) userinfoOf {
	i := strings.Index(display, "://")
	if i < 0 {
		return userinfoOf{}
	}
	authority := display[i+3:]
	if j := strings.IndexAny(authority, "/?#"); j >= 0 {
		authority = authority[:j]
	}
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		return userinfoOf{}
	}
	u := userinfoOf{head: display[:i+3], rest: display[i+3+at+1:], ok: true}
	u.user, u.password, u.hasPassword = strings.Cut(authority[:at], ":")
	if name, err := url.PathUnescape(u.user); err == nil {
		u.user = name
	}
	return u
}

// HidesPassword says whether the display URL shows a password as Redacted
// in its user info.
func HidesPassword(display string) bool {
	u := splitUserinfo(display)
	return u.ok && u.hasPassword && u.password == Redacted
}

// WithoutPassword is the display URL with the password left out of its
// user info (the user name stays), so that the backend takes the password
// from its variable: "redis://:xxxxx@h/0" is "redis://h/0".
func WithoutPassword(display string) string {
	u := splitUserinfo(display)
	switch {
	case !u.ok:
		return display
	case u.user == "":
		return u.head + u.rest
	}
	return u.head + url.User(u.user).String() + "@" + u.rest
}

// WithPassword is the display URL with password in the place of its
// hidden one: the URL to open. It is never printed.
func WithPassword(display, password string) string {
	if !HidesPassword(display) {
		return display
	}
	u := splitUserinfo(display)
	return u.head + url.UserPassword(u.user, password).String() + "@" + u.rest
}

// WithHiddenPassword is the display URL as it reads once the user named
// in it has a password from elsewhere (an environment variable): the user
// info gains ":xxxxx". A URL without a user name is returned as it is.
func WithHiddenPassword(display string) string {
	u := splitUserinfo(display)
	if !u.ok || u.hasPassword || u.user == "" {
		return display
	}
	return u.head + url.UserPassword(u.user, Redacted).String() + "@" + u.rest
}
