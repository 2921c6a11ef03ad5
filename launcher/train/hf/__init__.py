"""The Hugging Face fine-tuning recipe: `python -m launcher.train.hf PARAMETERS.yaml [key=value ...]`
(under torchrun for several processes). See launcher.train.hf.main."""
