#include "serve/server.h"

#include "base/error.h"
#include "serve/server_impl.h"

namespace sluice::serve {

void Server::Impl::authorize(const httplib::Request& req) const {
  if (opt.api_key.empty()) return;
  std::string auth = req.get_header_value("Authorization");
  if (auth.empty())
    throw ApiError{401,
                   "You didn't provide an API key. You need to provide your API key in an Authorization header "
                   "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
                   "invalid_request_error", "", "missing_api_key"};
  const std::string want = "Bearer " + opt.api_key;
  // Compare every byte, so the time taken says nothing about the key.
  unsigned diff = auth.size() != want.size();
  for (size_t i = 0; i < auth.size(); i++) diff |= unsigned(auth[i]) ^ unsigned(want[i % want.size()]);
  if (diff) throw ApiError{401, "Incorrect API key provided.", "invalid_request_error", "", "invalid_api_key"};
}

void Server::Impl::routes() {
  // Waiting requests hold a thread each; the spare ones answer 429s, /health and
  // idle keep-alive connections meanwhile.
  http.new_task_queue = [n = size_t(opt.queue) + 1 + 64] { return new httplib::ThreadPool(n); };
  http.set_payload_max_length(opt.max_request_bytes);
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
        res.set_content(dump(error_body(e)), "application/json");
        return httplib::Server::HandlerResponse::Handled;
      }));
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    send_error(res, ApiError{500, "Internal server error.", "server_error", "", ""});
  });

  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(dump(stats()), "application/json");
  });
  http.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      authorize(req);
      res.set_content(dump({{"object", "list"}, {"data", json::array({model_json()})}}), "application/json");
    } catch (const ApiError& e) {
      send_error(res, e);
    }
  });
  http.Get("/v1/models/(.+)", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      authorize(req);
      if (req.matches[1] != opt.model_id)
        throw ApiError{404, "The model '" + std::string(req.matches[1]) + "' does not exist.",
                       "invalid_request_error", "model", "model_not_found"};
      res.set_content(dump(model_json()), "application/json");
    } catch (const ApiError& e) {
      send_error(res, e);
    }
  });
  http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_generation(req, res, Endpoint::chat);
  });
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_generation(req, res, Endpoint::completions);
  });
}

Server::Server(Model& model, const text::Tokenizer& tok, ServerOptions opt)
    : impl_(std::make_unique<Impl>(model, tok, std::move(opt))) {
  if (impl_->opt.queue < 0) fail("serve", "--queue must be >= 0");
  if (impl_->opt.max_tokens < 1) fail("serve", "--max-tokens must be >= 1");
}

Server::~Server() = default;

void Server::bind() {
  Impl& s = *impl_;
  const std::string where = s.opt.host + ":" + std::to_string(s.opt.port);
  if (s.opt.port == 0)
    s.bound_port = s.http.bind_to_any_port(s.opt.host);
  else
    s.bound_port = s.http.bind_to_port(s.opt.host, s.opt.port) ? s.opt.port : -1;
  if (s.bound_port <= 0) fail(where, "cannot listen (address in use, or not an address of this machine?)");
}

int Server::port() const { return impl_->bound_port; }
const std::string& Server::model_id() const { return impl_->opt.model_id; }

void Server::serve() {
  if (impl_->bound_port <= 0) fail("serve", "bind() first");
  bool ok = impl_->http.listen_after_bind();
  if (!ok && !impl_->stopping) fail(impl_->opt.host + ":" + std::to_string(impl_->bound_port), "listening failed");
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
