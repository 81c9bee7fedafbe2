//! Line-by-line input for `mnemo ingest` and `mnemo import`, safe against hostile input: a line
//! is held in memory only up to a limit, and a line that is too long or not UTF-8 is reported
//! on its own while reading goes on with the next.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// One line of input, numbered from 1.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum InputLine {
    /// A line of text, without its line break.
    Text(String),
    /// A line longer than the limit; it was skipped. The number is its length in bytes.
    TooLong(usize),
    /// A line that is not UTF-8; the number is the offset of its first invalid byte.
    NotUtf8(usize),
}

/// Reads the next line, holding at most `limit` bytes of it; `None` at the end of the input.
///
/// # Errors
/// The input cannot be read.
pub(crate) async fn next_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    limit: usize,
) -> std::io::Result<Option<InputLine>> {
    let mut line = Vec::new();
    let mut length = 0_usize;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            if length == 0 {
                return Ok(None);
            }
            break;
        }
        let (chunk, ends_line) = match available.iter().position(|byte| *byte == b'\n') {
            Some(end) => (&available[..end], true),
            None => (available, false),
        };
        length += chunk.len();
        if length <= limit {
            line.extend_from_slice(chunk);
        }
        let used = chunk.len() + usize::from(ends_line);
        reader.consume(used);
        if ends_line {
            break;
        }
    }
    if length > limit {
        return Ok(Some(InputLine::TooLong(length)));
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(Some(match String::from_utf8(line) {
        Ok(text) => InputLine::Text(text),
        Err(error) => InputLine::NotUtf8(error.utf8_error().valid_up_to()),
    }))
}

impl InputLine {
    /// The text, or the problem in words naming the limit (`max_event_bytes`).
    pub(crate) fn into_text(self, limit: usize) -> Result<String, String> {
        match self {
            InputLine::Text(text) => Ok(text),
            InputLine::TooLong(length) => Err(format!(
                "the line is {length} bytes; the limit is {limit} (max_event_bytes); it was skipped"
            )),
            InputLine::NotUtf8(offset) => Err(format!(
                "the line is not UTF-8 text (invalid byte at offset {offset})"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn all(input: &[u8], limit: usize) -> Vec<InputLine> {
        // A tiny buffer, so that lines cross buffer boundaries.
        let mut reader = tokio::io::BufReader::with_capacity(3, input);
        let mut lines = Vec::new();
        while let Some(line) = next_line(&mut reader, limit).await.unwrap() {
            lines.push(line);
        }
        lines
    }

    #[tokio::test]
    async fn lines_too_long_or_not_utf8_are_reported_and_reading_goes_on() {
        let input = b"short\r\nthis line is too long\n\xff\xfebad\nok\nlast without break";
        assert_eq!(
            all(input, 10).await,
            vec![
                InputLine::Text("short".into()),
                InputLine::TooLong(21),
                InputLine::NotUtf8(0),
                InputLine::Text("ok".into()),
                InputLine::TooLong(18),
            ]
        );
        assert_eq!(
            all(b"\n\nx", 10).await,
            vec![
                InputLine::Text(String::new()),
                InputLine::Text(String::new()),
                InputLine::Text("x".into())
            ]
        );
        assert!(all(b"", 10).await.is_empty());
    }
}
