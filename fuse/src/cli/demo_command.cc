// `sigilfs demo`: a guided run on a throw-away vault showing what sigilfs does.
#include <fmt/core.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "commands.h"
#include "sigilfs/core/vault.h"

namespace sigilfs::cli {
namespace {

namespace fs = std::filesystem;

struct DemoOptions {
  std::string dir;  // where to put the demo vault; a fresh temporary directory if empty
  bool keep = false;
};

void Step(const std::string& text) { fmt::print("\n== {}\n", text); }

int RunDemo(const DemoOptions& o) {
  std::string base = o.dir;
  if (base.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "sigilfs-demo-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) return Fail(Status::FromErrno(errno, "mkdtemp"));
    base = tmpl;
  }
  const std::string vault = base + "/vault";
  const std::string passphrase = "demo passphrase";

  Step("Create a vault (Argon2id 'interactive' cost, AES-256-GCM pages)");
  core::VaultCreateOptions opts;
  opts.kdf = crypt::Argon2ParamsFor(crypt::KdfPreset::kInteractive);
  if (Status s = core::Vault::Create(vault, AsBytes(passphrase), opts); !s.ok()) return Fail(s);
  fmt::print("sigilfs init {}   (passphrase: \"{}\")\n", vault, passphrase);

  Step("The config file: parameters in clear, the master key wrapped");
  std::ifstream in(vault + "/" + core::kConfigFileName);
  std::stringstream text;
  text << in.rdbuf();
  fmt::print("{}", text.str());

  Step("Unlock with the right passphrase");
  auto v = core::Vault::Unlock(vault, AsBytes(passphrase));
  if (!v.ok()) return Fail(v.status());
  fmt::print("unlocked: content, name and verity subkeys derived (not shown)\n");

  Step("A wrong passphrase is refused");
  auto bad = core::Vault::Unlock(vault, AsBytes("not the passphrase"));
  fmt::print("sigilfs: {}\n", bad.ok() ? "UNEXPECTEDLY ACCEPTED" : bad.status().message());
  if (bad.ok()) return 1;

  if (o.keep) {
    fmt::print("\nThe demo vault is kept in {}\n", base);
  } else {
    std::error_code ec;
    fs::remove_all(base, ec);
  }
  fmt::print("\nDemo finished.\n");
  return 0;
}

}  // namespace

void RegisterDemoCommand(CLI::App& app, Action& action) {
  auto o = std::make_shared<DemoOptions>();
  auto* cmd = app.add_subcommand("demo", "Run a short guided demo on a throw-away vault");
  cmd->add_option("--dir", o->dir, "Directory for the demo (default: a new temporary one)");
  cmd->add_flag("--keep", o->keep, "Keep the demo vault afterwards");
  cmd->callback([&action, o] { action = [o] { return RunDemo(*o); }; });
}

}  // namespace sigilfs::cli
