// serve/guard.h — the checks a request passes before the server does any work
// for it: the API key, the Host header (DNS rebinding), the body's media type.
// Pure functions, tested without a server.
#pragma once
#include <string>
#include <vector>

namespace sluice::serve {

// `Authorization` value `Bearer KEY` (the scheme in any case, as RFC 7235 says)
// with KEY equal to `key`. Takes the same time whatever the first differing
// byte, so timing says nothing about the key.
bool bearer_matches(const std::string& authorization, const std::string& key);

// Is a Host header acceptable? A browser page can make a name the attacker owns
// resolve to 127.0.0.1 (DNS rebinding) and then talk to a local server as its
// "own" origin; the Host header still carries the attacker's name. Accepted:
// no Host, IP literals (v4, [v6]), "localhost", the bind address, and the names
// in `allowed` ("*" allows any). The port, if any, is ignored.
bool host_allowed(const std::string& host_header, const std::string& bind_host,
                  const std::vector<std::string>& allowed);

// Is a --host address reachable only from this machine (127.0.0.0/8, ::1,
// localhost)? Binding anything else without an API key serves the model to the network.
bool is_loopback_host(const std::string& host);

// Content-Type is application/json (parameters such as charset allowed).
// Browsers send text/plain and form types without a CORS preflight.
bool is_json_media_type(const std::string& content_type);

}  // namespace sluice::serve
