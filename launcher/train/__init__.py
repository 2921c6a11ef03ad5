"""The built-in trainer: MPT (Hugging Face) on Composer, MDS data streamed by mosaicml-streaming.

Entry points: `composer -m launcher.train $PARAMETERS`, `python -m launcher.train`,
`launcher train`, and `launcher.train.main.main(argv)`. This package's own
import stays light; torch, composer and streaming load only when training starts.
"""
