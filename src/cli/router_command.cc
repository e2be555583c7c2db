#include "cli/router_command.h"

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/format.h"
#include "embed/text_classifier.h"
#include "gateway/embedder_spec.h"

namespace tachyon::cli {
namespace {

struct RouterFlags {
  std::string examples;
  std::string embedder = "hash";
  std::string out, model;
  std::string text_key = "text", label_key = "label";
  int folds = 5;
  int epochs = 300;
  double l2 = 1e-3;
  bool json = false;
};

nlohmann::ordered_json ReportJson(const ClassifierReport& r) {
  nlohmann::ordered_json per_class = nlohmann::ordered_json::object();
  for (size_t k = 0; k < r.labels.size(); ++k) {
    per_class[r.labels[k]] = {{"precision", r.precision[k]}, {"recall", r.recall[k]}, {"support", r.support[k]}};
  }
  return {{"examples", r.examples},
          {"accuracy", r.accuracy},
          {"majority_baseline", r.majority_accuracy},
          {"labels", r.labels},
          {"per_class", per_class},
          {"confusion", r.confusion}};
}

void PrintReport(const ClassifierReport& r, const std::string& title) {
  std::printf("%s: accuracy %.4f on %lld examples (majority-class baseline %.4f)\n", title.c_str(), r.accuracy,
              static_cast<long long>(r.examples), r.majority_accuracy);
  std::printf("  %-24s %9s %9s %8s\n", "class", "precision", "recall", "support");
  for (size_t k = 0; k < r.labels.size(); ++k) {
    std::printf("  %-24s %9.3f %9.3f %8lld\n", r.labels[k].c_str(), r.precision[k], r.recall[k],
                static_cast<long long>(r.support[k]));
  }
  std::printf("  confusion (rows: true class, columns: predicted, in the order above):\n");
  for (size_t t = 0; t < r.labels.size(); ++t) {
    std::printf("  %-24s", r.labels[t].c_str());
    for (int64_t v : r.confusion[t]) std::printf(" %5lld", static_cast<long long>(v));
    std::printf("\n");
  }
}

int RunTrain(const RouterFlags& flags) {
  StatusOr<std::vector<LabeledText>> examples = ReadLabeledTexts(flags.examples, flags.text_key, flags.label_key);
  if (!examples.ok()) return Fail(examples.status().message());
  StatusOr<std::unique_ptr<Embedder>> embedder = MakeEmbedder(flags.embedder);
  if (!embedder.ok()) return Fail("--embedder: " + embedder.status().message());
  const ClassifierOptions options{.l2 = flags.l2, .epochs = flags.epochs};
  nlohmann::ordered_json out = {{"examples_file", flags.examples}, {"embedder", flags.embedder}};
  if (flags.folds >= 2) {
    StatusOr<ClassifierReport> cv = CrossValidate(*examples, **embedder, flags.embedder, flags.folds, options);
    if (!cv.ok()) return Fail(cv.status().message());
    out["folds"] = flags.folds;
    out["cross_validation"] = ReportJson(*cv);
    if (!flags.json) PrintReport(*cv, std::to_string(flags.folds) + "-fold cross-validation");
  }
  StatusOr<TextClassifier> model = TextClassifier::Train(*examples, **embedder, flags.embedder, options);
  if (!model.ok()) return Fail(model.status().message());
  if (Status s = model->Save(flags.out); !s.ok()) return Fail(s.message());
  out["out"] = flags.out;
  out["labels"] = model->labels();
  if (flags.json) {
    std::cout << out.dump() << "\n";
  } else {
    std::printf("trained on all %zu examples (%zu classes, %s): %s\n", examples->size(), model->labels().size(),
                flags.embedder.c_str(), flags.out.c_str());
  }
  return 0;
}

int RunEval(const RouterFlags& flags) {
  StatusOr<TextClassifier> model = TextClassifier::Load(flags.model);
  if (!model.ok()) return Fail(model.status().message());
  StatusOr<std::vector<LabeledText>> examples = ReadLabeledTexts(flags.examples, flags.text_key, flags.label_key);
  if (!examples.ok()) return Fail(examples.status().message());
  StatusOr<std::unique_ptr<Embedder>> embedder = MakeEmbedder(model->embedder_spec());
  if (!embedder.ok()) return Fail("the model's embedder " + model->embedder_spec() + ": " + embedder.status().message());
  std::vector<std::string> texts;
  for (const LabeledText& e : *examples) texts.push_back(e.text);
  StatusOr<std::vector<TextClassifier::Prediction>> predictions = model->Predict(texts, **embedder);
  if (!predictions.ok()) return Fail(predictions.status().message());
  // Labels the model does not know count as errors, each under its own name.
  std::vector<std::string> labels = model->labels();
  auto label_index = [&](const std::string& l) {
    auto it = std::find(labels.begin(), labels.end(), l);
    if (it != labels.end()) return static_cast<int>(it - labels.begin());
    labels.push_back(l);
    return static_cast<int>(labels.size() - 1);
  };
  std::vector<int> truth, predicted;
  for (size_t i = 0; i < examples->size(); ++i) {
    truth.push_back(label_index((*examples)[i].label));
    predicted.push_back((*predictions)[i].label);
  }
  const ClassifierReport report = Evaluate(labels, truth, predicted);
  if (flags.json) {
    nlohmann::ordered_json out = ReportJson(report);
    out["model"] = flags.model;
    out["embedder"] = model->embedder_spec();
    std::cout << out.dump() << "\n";
  } else {
    PrintReport(report, flags.model + " on " + flags.examples);
  }
  return 0;
}

void AddExampleOptions(CLI::App* cmd, RouterFlags* flags) {
  cmd->add_option("--examples", flags->examples, "JSON lines with a text and a label, e.g. {\"text\": ..., \"label\": ...}")
      ->required();
  cmd->add_option("--text-key", flags->text_key,
                  "The text's key (a string, or an array whose first string is taken, as MT-Bench's turns)")
      ->capture_default_str();
  cmd->add_option("--label-key", flags->label_key, "The label's key (a string, number or boolean)")
      ->capture_default_str();
  cmd->add_flag("--json", flags->json, "One JSON object (accuracy, per_class, confusion, ...)");
}

}  // namespace

void AddRouterCommand(CLI::App& app, int* exit_code) {
  CLI::App* router = app.add_subcommand(
      "router", "The task classifier of a classify route: train it on labelled texts, evaluate it");
  router->require_subcommand(1);
  auto train_flags = std::make_shared<RouterFlags>();
  CLI::App* train = router->add_subcommand(
      "train", "Fit a multinomial logistic regression over an embedder's vector and simple text features, report its "
               "k-fold cross-validated accuracy (with the majority-class baseline), and save it trained on all "
               "examples, e.g. tachyon router train --examples ../shared/data/prompts/mt_bench/question.jsonl "
               "--text-key turns --label-key category --out router.bin");
  AddExampleOptions(train, train_flags.get());
  train->add_option("--embedder", train_flags->embedder,
                    "hash, hash:DIM, words:VECTORS, local:MODEL.gguf or remote:BASE_URL#MODEL")
      ->capture_default_str();
  train->add_option("--out", train_flags->out, "The model file")->required();
  train->add_option("--folds", train_flags->folds, "Cross-validation folds (0: none)")->capture_default_str();
  train->add_option("--epochs", train_flags->epochs, "Passes over the examples")->capture_default_str();
  train->add_option("--l2", train_flags->l2, "L2 penalty on the weights")->capture_default_str();
  train->callback([train_flags, exit_code] { *exit_code = RunTrain(*train_flags); });
  auto eval_flags = std::make_shared<RouterFlags>();
  CLI::App* eval = router->add_subcommand(
      "eval", "Accuracy, per-class precision and recall, and the confusion matrix of a trained model on labelled "
              "texts (both error directions: a hard task sent to the small model, an easy one to the large)");
  AddExampleOptions(eval, eval_flags.get());
  eval->add_option("--model", eval_flags->model, "A file written by tachyon router train")->required();
  eval->callback([eval_flags, exit_code] { *exit_code = RunEval(*eval_flags); });
}

}  // namespace tachyon::cli
