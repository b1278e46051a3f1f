"""Tiny image-generation pipelines built from configs with random weights, offline, denoising on `neuron`
eagerly or with the denoiser compiled by `torch.compile(backend="neuron")`: text-to-image (Stable Diffusion's
pipeline: a CLIP text encoder and tokenizer, a cross-attention UNet, a VAE, a DDIM scheduler) and
class-conditional (DiT: a transformer denoiser).

    python examples/hf/diffusers_pipeline.py [--pipeline text-to-image|dit] [--compile] [--cpu]
"""
import argparse
import json
import os
import string
import tempfile

import torch
from diffusers import (AutoencoderKL, DDIMScheduler, DiTPipeline, DiTTransformer2DModel, StableDiffusionPipeline,
                       UNet2DConditionModel)
from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

PROMPTS = ["a red boat", "a cat on a mat"]


def tiny_vae() -> AutoencoderKL:
    return AutoencoderKL(in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(16,),
                         down_block_types=("DownEncoderBlock2D",), up_block_types=("UpDecoderBlock2D",),
                         layers_per_block=1, norm_num_groups=8, sample_size=8)


def letter_tokenizer() -> CLIPTokenizer:
    """CLIP's tokenizer over a vocabulary of single letters (no merges): enough to encode the prompts offline."""
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for letter in string.ascii_lowercase:
        vocab[letter] = len(vocab)
        vocab[letter + "</w>"] = len(vocab)  # a word's last letter
    with tempfile.TemporaryDirectory(prefix="clip-tokenizer-") as directory:
        vocab_file, merges_file = os.path.join(directory, "vocab.json"), os.path.join(directory, "merges.txt")
        with open(vocab_file, "w") as f:
            json.dump(vocab, f)
        with open(merges_file, "w") as f:
            f.write("#version: 0.2\n")
        return CLIPTokenizer(vocab_file, merges_file, model_max_length=16)


def tiny_text_to_image_pipeline(seed: int = 0) -> StableDiffusionPipeline:
    torch.manual_seed(seed)
    tokenizer = letter_tokenizer()
    text_encoder = CLIPTextModel(CLIPTextConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        max_position_embeddings=16, projection_dim=32, bos_token_id=0, eos_token_id=1, pad_token_id=1))
    unet = UNet2DConditionModel(
        sample_size=8, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(16, 32),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=32, attention_head_dim=8, norm_num_groups=8)
    for model in (text_encoder, unet):
        model.eval()
    return StableDiffusionPipeline(
        vae=tiny_vae().eval(), text_encoder=text_encoder, tokenizer=tokenizer, unet=unet,
        scheduler=DDIMScheduler(num_train_timesteps=100, clip_sample=False, steps_offset=1),
        safety_checker=None, feature_extractor=None, requires_safety_checker=False)


def tiny_dit_pipeline(seed: int = 0) -> DiTPipeline:
    torch.manual_seed(seed)
    transformer = DiTTransformer2DModel(
        num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=8, num_layers=2, sample_size=8,
        patch_size=2, num_embeds_ada_norm=1000, norm_num_groups=8)  # DiT guides with class 1000
    vae = tiny_vae()
    scheduler = DDIMScheduler(num_train_timesteps=100)
    # eval mode, as from_pretrained leaves models (in training mode DiT randomly drops class labels)
    transformer.eval()
    vae.eval()
    return DiTPipeline(transformer=transformer, vae=vae, scheduler=scheduler,
                       id2label={0: "cat", 1: "dog", 2: "boat"})


def generate(device: str, pipeline_kind: str = "text-to-image", compile_denoiser: bool = False, steps: int = 4):
    generator = torch.Generator().manual_seed(7)
    if pipeline_kind == "text-to-image":
        pipeline, denoiser = tiny_text_to_image_pipeline().to(device), "unet"
        conditioning = dict(prompt=PROMPTS, height=8, width=8)
    elif pipeline_kind == "dit":
        pipeline, denoiser = tiny_dit_pipeline().to(device), "transformer"
        conditioning = dict(class_labels=[0, 2])
    else:
        raise ValueError(f"unknown pipeline {pipeline_kind!r}: choose text-to-image or dit")
    pipeline.set_progress_bar_config(disable=True)
    if compile_denoiser:
        setattr(pipeline, denoiser, torch.compile(getattr(pipeline, denoiser), backend="neuron"))
    images = pipeline(**conditioning, num_inference_steps=steps, guidance_scale=2.0, output_type="np",
                      generator=generator).images
    return torch.from_numpy(images)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pipeline", choices=("text-to-image", "dit"), default="text-to-image")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--cpu", action="store_true")
    args = parser.parse_args()
    images = generate("cpu" if args.cpu else "neuron", args.pipeline, args.compile)
    reference = images if args.cpu else generate("cpu", args.pipeline)
    print("RESULT " + json.dumps({"shape": list(images.shape), "max_diff_vs_cpu": (images - reference).abs().max().item(),
                                  "mean": images.mean().item()}), flush=True)


if __name__ == "__main__":
    main()
