// An error the server answers with instead of a result: the HTTP status and OpenAI's error body
// {"error": {"message", "type", "param", "code"}}, which the official clients turn into their
// APIError (BadRequestError for 400, NotFoundError for 404).
#pragma once
#include <stdexcept>
#include <string>

namespace nemotron::serve {

struct ApiError : std::runtime_error {
  int status;
  std::string type, param, code;  // param and code may be "" (null in the body)
  ApiError(int status, std::string message, std::string type, std::string param = "", std::string code = "")
      : std::runtime_error(std::move(message)), status(status), type(std::move(type)), param(std::move(param)),
        code(std::move(code)) {}
};

// 400 invalid_request_error naming the field (`param`) at fault.
inline ApiError bad_request(std::string message, std::string param = "") {
  return ApiError(400, std::move(message), "invalid_request_error", std::move(param));
}

}  // namespace nemotron::serve
