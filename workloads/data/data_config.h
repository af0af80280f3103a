// The data keys (train and infer read them alike), typed (harness/spec/config.h): which data a
// point reads and how labelled files are split (DataKeys, declared in labelled_keys.cpp), and
// how text is tokenized and cached (TextKeys, declared in text_keys.cpp).
#pragma once
#include <string>

#include "harness/spec/config.h"

namespace sb::data {

// Tasks train, infer.
struct DataKeys {
  std::string data;                 // markov, text, a token file or a labelled file (kDataDoc)
  std::string validation;           // labelled: the validation file; "" = hold out a fraction
  double validation_fraction = 0;   // labelled: held out when validation is ""
  std::string tokenizer_dir;        // the tokenizer's files; "" = the model folder
  bool truncate = true;             // labelled: cut examples longer than seq (else an error)
  static void declare(Fields<DataKeys>& f);
};

// Tasks train, infer: data = text.
struct TextKeys {
  std::string token_cache;        // the folder of the cached token files
  double heldout_fraction = 0;    // documents held out for evaluation
  std::string tokenizer;          // a tokenizer name, or auto (the model family's)
  static void declare(Fields<TextKeys>& f);
};

}  // namespace sb::data
