#include "serve/server.h"

#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "base/error.h"
#include "serve/guard.h"
#include "serve/server_impl.h"
#include "serve/socket.h"

namespace sluice::serve {

const char* server_version() {
#ifdef SLUICE_VERSION
  return SLUICE_VERSION;
#else
  return "0.2.0";
#endif
}

Server::Impl::Impl(ServerOptions o)
    : opt(std::move(o)),
      req_mem(opt.request_memory),
      sched(opt.queue, std::max(opt.parallel, 1)),
      id_rng(std::random_device{}() ^ uint64_t(unix_now())) {
  lim.model_id = opt.model_id;
  lim.max_tokens = opt.max_tokens;
  lim.lenient = opt.lenient;
  lim.defaults = opt.defaults;
  declare_metrics();
  routes();
}

void Server::Impl::attach(Model& m, const text::Tokenizer& t) {
  model = &m;
  tok = &t;
  if (opt.saved_states > 0)
    opt.state_cache_bytes = std::min<uint64_t>(opt.state_cache_bytes, m.plan().state_reserve /
                                                                           uint64_t(opt.parallel + opt.saved_states) *
                                                                           uint64_t(opt.saved_states));
  cache = std::make_unique<PrefixCache>(opt.state_cache_bytes);
  batch = std::make_unique<Batch>(m, opt.parallel, cache.get());
  decoder = std::thread([this] { decode_loop(); });
  if (opt.model_id.empty()) opt.model_id = basename_of(m.checkpoint().dir);
  lim.model_id = opt.model_id;
  lim.vocab_size = m.config().vocab_size;
  lim.context_length = m.config().max_position_embeddings;
  if (opt.context_length > 0) lim.context_length = std::min<int64_t>(lim.context_length, opt.context_length);
  ready = true;  // publishes the fields above
}

void Server::Impl::guard(const httplib::Request& req, bool open) const {
  if (!host_allowed(req.get_header_value("Host"), opt.host, opt.allowed_hosts))
    throw ApiError{403,
                   "The Host header '" + req.get_header_value("Host") +
                       "' is not an address of this server (a DNS-rebinding guard); start it with --allowed-hosts "
                       "to accept that name.",
                   "invalid_request_error", "", "host_not_allowed"};
  if (open || opt.api_key.empty()) return;
  std::string auth = req.get_header_value("Authorization");
  if (auth.empty())
    throw ApiError{401,
                   "You didn't provide an API key. You need to provide your API key in an Authorization header "
                   "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
                   "invalid_request_error", "", "missing_api_key"};
  if (!bearer_matches(auth, opt.api_key))
    throw ApiError{401, "Incorrect API key provided.", "invalid_request_error", "", "invalid_api_key"};
}

void Server::Impl::drop_body(const httplib::Request& req, httplib::Response& res,
                             const httplib::ContentReader* reader, uint64_t drain) const {
  const std::string length = req.get_header_value("Content-Length");
  // No Content-Length and not chunked: there is no body (RFC 9112, 6.3), nothing to drop. (Shutting
  // the reading side would also lose the answer: cpp-httplib writes none on a socket it sees closed.)
  if (length.empty() && !req.has_header("Transfer-Encoding")) return;
  const bool small = !req.has_header("Content-Encoding") && !req.has_header("Transfer-Encoding") &&
                     !req.is_multipart_form_data() && !length.empty() &&
                     std::strtoull(length.c_str(), nullptr, 10) <= drain;
  if (reader && small) {
    (*reader)([](const char*, size_t) { return true; });
    return;
  }
  // Closing with the body unread: no reading, no decompressing, for a client that was refused.
  res.set_header("Connection", "close");
  int fd = find_connection_fd(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
  if (fd >= 0) ::shutdown(fd, SHUT_RD);
}

namespace {

ApiError too_large(uint64_t limit, bool by_memory) {
  return {413,
          "The request body is larger than this server accepts (" + std::to_string(limit) + " bytes decoded, " +
              (by_memory ? "what the memory it sets aside for requests holds: --request-memory, --ram-budget)."
                         : "--max-request-bytes)."),
          "invalid_request_error", "", "request_too_large"};
}

ApiError memory_busy() {
  return {503,
          "The server is reading other large requests and has no memory free for this one; retry after the time in "
          "the Retry-After header.",
          "server_error", "", "server_busy"};
}

}  // namespace

std::string Server::Impl::read_body(const httplib::Request& req, httplib::Response& res,
                                    const httplib::ContentReader& reader, MemoryGrant& grant) {
  // Paid for before it is read: a plain body by its Content-Length, a chunked or
  // compressed one (size unknown until decoded) as it grows, by doubling.
  std::string encoding = req.get_header_value("Content-Encoding");
  for (char& c : encoding) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (!encoding.empty() && encoding != "gzip" && encoding != "deflate" && encoding != "identity") {
    uint64_t seen = 0;  // read (decoded, if the library can) and dropped, up to the limit
    reader([&](const char*, size_t n) { return (seen += n) <= opt.max_request_bytes; });
    res.set_header("Connection", "close");
    throw ApiError{400, "The body's Content-Encoding '" + encoding + "' is not supported (gzip or deflate).",
                   "invalid_request_error", "", "invalid_body"};
  }
  const uint64_t cap = prompt_cap();
  const uint64_t by_memory = largest_body(req_mem.capacity(), cap);
  const uint64_t limit = std::min<uint64_t>(opt.max_request_bytes, by_memory);
  grant = MemoryGrant(&req_mem, 0);
  uint64_t paid = 0;
  auto pay = [&](uint64_t bytes) {
    const uint64_t more = request_cost(bytes, cap) - (paid ? request_cost(paid, cap) : 0);
    if (!grant.take(more, kMemoryWait)) return false;
    paid = bytes;
    return true;
  };
  const std::string length = req.get_header_value("Content-Length");
  const bool plain = !length.empty() && !req.has_header("Content-Encoding") && res.status != 413;
  std::string body;
  if (plain) {
    const uint64_t n = std::strtoull(length.c_str(), nullptr, 10);
    // Refused bodies within --max-request-bytes are read and dropped: the client gets its answer.
    if (n > limit) {
      drop_body(req, res, &reader, opt.max_request_bytes);
      throw too_large(limit, limit < opt.max_request_bytes);
    }
    if (!pay(n)) {
      drop_body(req, res, &reader, opt.max_request_bytes);
      throw memory_busy();
    }
    body.reserve(n);
  } else if (!pay(std::min<uint64_t>(kDrainLimit, limit))) {
    drop_body(req, res, nullptr);
    throw memory_busy();
  }
  bool over = false, busy = false;
  uint64_t seen = 0;
  // The receiver sees the body decoded (chunks joined, gzip/deflate inflated) a piece at a
  // time, so the limit holds for what is decoded, not for what was sent. A refused body
  // is read on and dropped up to --max-request-bytes (a client still sending it would
  // see its connection reset instead of the answer); past that the connection closes.
  bool ok = reader([&](const char* data, size_t n) {
    seen += n;
    if (over || busy) return seen <= opt.max_request_bytes;
    const uint64_t want = body.size() + n;
    if (want > limit) over = true;
    else if (want > paid && !pay(std::min(limit, std::max(want, 2 * paid)))) busy = true;
    if (over || busy) {
      std::string().swap(body);
      return seen <= opt.max_request_bytes;
    }
    body.append(data, n);
    return true;
  });
  if ((over || busy) && !ok) drop_body(req, res, nullptr);  // past what is drained: closed unread
  if (over || res.status == 413) {
    // cpp-httplib refused a Content-Length over the limit itself and skips that body.
    if (!over) res.set_header("Connection", "close");
    throw too_large(over ? limit : opt.max_request_bytes, over && limit < opt.max_request_bytes);
  }
  if (busy) throw memory_busy();
  if (!ok) {  // what is left of it unread is dropped with the connection, after the answer
    res.set_header("Connection", "close");
    throw ApiError{400, "The request body could not be read (bad chunking or compression?).",
                   "invalid_request_error", "", "invalid_body"};
  }
  return body;
}

void Server::Impl::handle_post(const httplib::Request& req, httplib::Response& res,
                               const httplib::ContentReader* reader, Api api) {
  try {
    guard(req, false);
    if (!is_json_media_type(req.get_header_value("Content-Type"))) {
      drop_body(req, res, reader);
      throw ApiError{415,
                     "Content-Type must be application/json (got '" + req.get_header_value("Content-Type") + "').",
                     "invalid_request_error", "", "unsupported_media_type"};
    }
    if (!ready) {
      drop_body(req, res, reader);
      throw loading();
    }
  } catch (const ApiError& e) {
    if (e.status == 401 || e.status == 403) drop_body(req, res, reader);
    if (e.status == 503) res.set_header("Retry-After", "5");
    send_error(res, e);
    return;
  }
  std::string body;
  MemoryGrant grant;
  if (reader) {
    try {
      body = read_body(req, res, *reader, grant);
    } catch (const ApiError& e) {
      if (e.status == 503) res.set_header("Retry-After", "1");
      send_error(res, e);
      return;
    }
  }
  handle_generation(req, res, std::move(body), std::move(grant), api);
}

std::string allowed_methods(const std::string& path) {
  if (path == "/v1/chat/completions" || path == "/v1/completions" || path == "/v1/responses") return "POST";
  if (path == "/v1/models" || path.rfind("/v1/models/", 0) == 0 || path == "/health" || path == "/metrics")
    return "GET, HEAD";
  return "";
}

void Server::Impl::finish_request(const httplib::Request& req, const httplib::Response& res) {
  RequestContext& c = request_context();
  RequestLog& log = c.log;
  if (log.method.empty()) {  // refused before routing (a malformed request line or headers)
    log.method = req.method;
    log.path = req.path;
    log.remote = req.remote_addr;
  }
  log.status = res.status;
  if (c.t0 != Clock::time_point{}) log.seconds = seconds_since(c.t0);
  log.time = log_time();
  const std::string line = opt.log_json ? log.json_line() : log.text();
  std::fprintf(stderr, "%s\n", line.c_str());  // one write per line
  static const char* const kRoutes[] = {"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/models",
                                        "/health", "/metrics"};
  std::string route = "other";
  for (const char* r : kRoutes)
    if (req.path == r) route = r;
  if (req.path.rfind("/v1/models/", 0) == 0) route = "/v1/models/{id}";
  metrics.add("sluice_requests_total", 1, {{"route", route}, {"status", std::to_string(res.status)}});
  if (log.seconds >= 0) metrics.observe("sluice_request_duration_seconds", log.seconds);
  watch.set_busy(req.remote_addr, req.remote_port, false);
  c = RequestContext{};
}

void Server::Impl::routes() {
  connection_hooks();
  get_routes();
  post_routes();
  refusal_routes();
}

void Server::Impl::connection_hooks() {
  // Waiting requests and slow clients hold a thread each; the spare ones answer 429s,
  // /health and idle keep-alive connections meanwhile.
  const size_t threads = size_t(std::max(opt.max_connections, opt.queue + 8));
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_payload_max_length(opt.max_request_bytes);
  // Exclusive bind: cpp-httplib's default also sets SO_REUSEPORT, with which a second
  // server on the same port starts silently and the two share the connections.
  http.set_socket_options([this](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);  // restarts despite TIME_WAIT
    listen_fd = sock;
  });
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response&) {
    RequestContext& c = request_context();
    c = RequestContext{};
    c.t0 = Clock::now();
    c.log.method = req.method;
    c.log.path = req.path;
    c.log.remote = req.remote_addr;
    watch.set_busy(req.remote_addr, req.remote_port, true);
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http.set_logger([this](const httplib::Request& req, const httplib::Response& res) { finish_request(req, res); });
  http.set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        ApiError e;
        e.status = res.status;
        if (res.status == 404) {
          e.message = "Invalid URL (" + req.method + " " + req.path + ")";
        } else if (res.status == 413) {
          e.message = "The request body is larger than this server accepts (" +
                      std::to_string(opt.max_request_bytes) + " bytes, --max-request-bytes).";
          e.code = "request_too_large";
        } else {
          e.message = "HTTP error " + std::to_string(res.status) + ".";
          if (res.status >= 500) e.type = "server_error";
        }
        send_error(res, e);
        return httplib::Server::HandlerResponse::Handled;
      }));
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    send_error(res, ApiError{500, "Internal server error.", "server_error", "", ""});
  });
}

void Server::Impl::get_routes() {
  http.Get("/health", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      guard(req, true);
    } catch (const ApiError& e) {
      return send_error(res, e);
    }
    if (!ready) res.status = 503;
    res.set_content(dump(stats()), "application/json");
  });
  http.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      guard(req, false);
    } catch (const ApiError& e) {
      return send_error(res, e);
    }
    res.set_content(metrics_text(), "text/plain; version=0.0.4; charset=utf-8");
  });
  http.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      guard(req, false);
      res.set_content(dump({{"object", "list"}, {"data", json::array({model_json()})}}), "application/json");
    } catch (const ApiError& e) {
      send_error(res, e);
    }
  });
  http.Get("/v1/models/(.+)", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      guard(req, false);
      if (req.matches[1] != opt.model_id)
        throw ApiError{404, "The model '" + std::string(req.matches[1]) + "' does not exist.",
                       "invalid_request_error", "model", "model_not_found"};
      res.set_content(dump(model_json()), "application/json");
    } catch (const ApiError& e) {
      send_error(res, e);
    }
  });
}

namespace {
const std::pair<const char*, Api> kPosts[] = {{"/v1/chat/completions", Api::chat_completions},
                                              {"/v1/completions", Api::completions},
                                              {"/v1/responses", Api::responses}};
}  // namespace

void Server::Impl::post_routes() {
  for (auto& [path, api] : kPosts) {
    // With a body (the reader decodes it as it is read) ...
    http.Post(path, [this, api = api](const httplib::Request& req, httplib::Response& res,
                                      const httplib::ContentReader& reader) { handle_post(req, res, &reader, api); });
    // ... and without one (Content-Length: 0).
    http.Post(path, [this, api = api](const httplib::Request& req, httplib::Response& res) {
      handle_post(req, res, nullptr, api);
    });
  }
}

void Server::Impl::refusal_routes() {
  // Any other request is refused, one with a body without reading it: cpp-httplib
  // would otherwise read it whole (chunked bodies without a size limit) before its 404.
  // A route asked with a method it does not answer gets 405 and an Allow header.
  auto refuse_route = [this](const httplib::Request& req, httplib::Response& res) {
    const std::string allow = allowed_methods(req.path);
    ApiError e{404, "Invalid URL (" + req.method + " " + req.path + ")", "invalid_request_error", "", ""};
    if (!allow.empty())
      e = ApiError{405,
                   "The method " + req.method + " is not allowed for " + req.path + " (allowed: " + allow + ").",
                   "invalid_request_error", "", "method_not_allowed"};
    try {
      guard(req, true);
    } catch (const ApiError& g) {
      e = g;
    }
    if (e.status == 405) res.set_header("Allow", allow);
    return e;
  };
  auto unknown = [this, refuse_route](const httplib::Request& req, httplib::Response& res,
                                      const httplib::ContentReader& reader) {
    ApiError e = refuse_route(req, res);
    drop_body(req, res, &reader);
    send_error(res, e);
  };
  auto unknown_bodiless = [refuse_route](const httplib::Request& req, httplib::Response& res) {
    send_error(res, refuse_route(req, res));
  };
  for (auto& [path, api] : kPosts) http.Get(path, unknown_bodiless);
  http.Post(".*", unknown);
  http.Put(".*", unknown);
  http.Patch(".*", unknown);
  http.Delete(".*", unknown);
  http.Put(".*", unknown_bodiless);
  http.Patch(".*", unknown_bodiless);
  http.Delete(".*", unknown_bodiless);
  http.Options(".*", unknown_bodiless);
}

Server::Server(ServerOptions opt) : impl_(std::make_unique<Impl>(std::move(opt))) {
  if (impl_->opt.queue < 0) fail("serve", "--queue must be >= 0");
  if (impl_->opt.parallel < 1) fail("serve", "--parallel must be >= 1");
  if (impl_->opt.max_tokens < 1) fail("serve", "--max-tokens must be >= 1");
  if (impl_->opt.max_prompt_tokens < 1) fail("serve", "--max-prompt-tokens must be >= 1");
}

Server::Server(Model& model, const text::Tokenizer& tok, ServerOptions opt) : Server(std::move(opt)) {
  attach(model, tok);
}

Server::~Server() = default;

void Server::set_loading(const std::string& phase) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->loading_phase = phase;
}

void Server::attach(Model& model, const text::Tokenizer& tok) { impl_->attach(model, tok); }

void Server::bind() {
  Impl& s = *impl_;
  const std::string where = s.opt.host + ":" + std::to_string(s.opt.port);
  if (s.opt.port == 0)
    s.bound_port = s.http.bind_to_any_port(s.opt.host);
  else
    s.bound_port = s.http.bind_to_port(s.opt.host, s.opt.port) ? s.opt.port : -1;
  if (s.bound_port <= 0)
    fail(where, "cannot listen: the port is in use (another server?) or the address is not one of this machine's");
  // cpp-httplib listens with a backlog of 5: bursts of clients got "connection reset".
  if (s.listen_fd >= 0) ::listen(s.listen_fd, 1024);
}

int Server::port() const { return impl_->bound_port; }
const std::string& Server::model_id() const { return impl_->opt.model_id; }

void Server::serve() {
  Impl& s = *impl_;
  if (s.bound_port <= 0) fail("serve", "bind() first");
  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    while (!done) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      // Stopping: idle keep-alive connections are closed at once, so serve() need not
      // wait for their keep-alive timeout.
      s.watch.sweep(s.bound_port, s.stopping ? 0.0 : s.opt.header_timeout);
    }
  });
  bool ok = s.http.listen_after_bind();
  done = true;
  watchdog.join();
  if (!ok && !s.stopping) fail(s.opt.host + ":" + std::to_string(s.bound_port), "listening failed");
}

void Server::stop() {
  impl_->stopping = true;
  impl_->sched.close();
  impl_->http.stop();
}

void Server::cancel_running() { impl_->cancel = true; }
bool Server::running_generation() const { return impl_->generating.load(); }
nlohmann::json Server::stats() const { return impl_->stats(); }

}  // namespace sluice::serve
